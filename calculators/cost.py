"""Cost per million tokens and per million requests.

    usd_per_million_tokens   = 1e6 x hourly price x GPUs / (3600 x tokens per second)
    usd_per_million_requests = 1e6 x hourly price x GPUs / (3600 x requests per second)
Price the throughput you can sell: the SLO operating point (the highest load whose p99 still
meets the SLO, ``slo_operating_point``), not the peak a saturated server reaches. A predicted
throughput (``calculators.fleet.replica_from_roofline``) brings its error band: the cost per million
tokens then also comes as the range that band spans.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from calculators.efficiency import ErrorBand
from contract.checks import non_negative_number, positive_number


def usd_per_million_tokens(hourly_usd: float, gpus: int, tokens_per_s: float) -> float:
    """Dollars per 1e6 tokens for ``gpus`` GPUs at ``hourly_usd`` each producing ``tokens_per_s`` together."""
    return 1e6 * non_negative_number("hourly_usd", hourly_usd) * positive_number("gpus", gpus) \
        / (3600 * positive_number("tokens_per_s", tokens_per_s))


def usd_per_million_requests(hourly_usd: float, gpus: int, requests_per_s: float) -> float:
    return 1e6 * non_negative_number("hourly_usd", hourly_usd) * positive_number("gpus", gpus) \
        / (3600 * positive_number("requests_per_s", requests_per_s))


@dataclass(frozen=True)
class OperatingPoint:
    """The highest load that meets the SLO, linearly interpolated between measured levels."""

    load: float
    throughput: float
    p99_s: float
    interpolated: bool


def slo_operating_point(loads: Sequence[float], throughputs: Sequence[float], p99_s: Sequence[float],
                        slo_p99_s: float) -> OperatingPoint | None:
    """Walk levels in increasing load; stop at the first whose p99 breaks the SLO and interpolate
    load and throughput to where p99 crosses it. None when even the lowest level misses the SLO."""
    if not len(loads) == len(throughputs) == len(p99_s) or not loads:
        raise ValueError("loads, throughputs and p99_s must be non-empty and of equal length")
    positive_number("slo_p99_s", slo_p99_s)
    points = sorted(zip(loads, throughputs, p99_s))
    best = None
    for load, throughput, p99 in points:
        if p99 <= slo_p99_s:
            best = OperatingPoint(load, throughput, p99, False)
            continue
        if best is not None and p99 > best.p99_s:
            share = (slo_p99_s - best.p99_s) / (p99 - best.p99_s)
            best = OperatingPoint(best.load + share * (load - best.load),
                                  best.throughput + share * (throughput - best.throughput), slo_p99_s, True)
        break
    return best


@dataclass(frozen=True)
class Cost:
    """``--json`` keys are these field names."""

    hourly_usd: float
    gpus: int
    tokens_per_s: float
    usd_per_hour: float
    usd_per_million_tokens: float
    slo_tokens_per_s: float | None
    usd_per_million_tokens_at_slo: float | None
    requests_per_s: float | None
    usd_per_million_requests: float | None
    error_band: str | None = None                               # of a predicted tokens_per_s
    usd_per_million_tokens_range: tuple[float, float] | None = None


def cost(hourly_usd: float, gpus: int, tokens_per_s: float, *, slo_tokens_per_s: float | None = None,
         requests_per_s: float | None = None, tokens_per_s_band: ErrorBand | None = None) -> Cost:
    """Peak-throughput cost, cost at the SLO operating point and per request, where given; with the
    range of cost per million tokens that ``tokens_per_s_band`` spans when the throughput is predicted."""
    spread = None
    if tokens_per_s_band is not None:
        slow, fast = tokens_per_s / (1 + tokens_per_s_band.relative), tokens_per_s * (1 + tokens_per_s_band.relative)
        spread = (usd_per_million_tokens(hourly_usd, gpus, fast), usd_per_million_tokens(hourly_usd, gpus, slow))
    return Cost(
        hourly_usd=hourly_usd, gpus=gpus, tokens_per_s=tokens_per_s, usd_per_hour=hourly_usd * gpus,
        usd_per_million_tokens=usd_per_million_tokens(hourly_usd, gpus, tokens_per_s),
        slo_tokens_per_s=slo_tokens_per_s,
        usd_per_million_tokens_at_slo=(None if slo_tokens_per_s is None
                                       else usd_per_million_tokens(hourly_usd, gpus, slo_tokens_per_s)),
        requests_per_s=requests_per_s,
        usd_per_million_requests=(None if requests_per_s is None
                                  else usd_per_million_requests(hourly_usd, gpus, requests_per_s)),
        error_band=None if tokens_per_s_band is None else tokens_per_s_band.describe(),
        usd_per_million_tokens_range=spread,
    )
