"""What a fleet run means for its users: latency per window against the SLO, attainment, and cost.

Windows are fixed spans of send time (`window_s`, 5 minutes by default, as SLOs are usually read).
A window meets the SLO when every p99 limit given holds over the requests sent in it; a request that
never finished counts as infinitely slow, so a window that lost requests cannot pass by dropping them.
Attainment is the share of windows with at least `min_requests` requests that meet it.

Cost: every replica is billed from when it was asked for until it stopped (`FleetRun.replica_seconds`),
for its GPUs at the catalog's hourly price; the day's cost scales the run's span to 24 hours; the cost
per million output tokens divides by the tokens the run generated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from calculators.plan.fleet_run import FleetRun

METRICS = ("ttft_s", "tpot_s", "e2e_s")


@dataclass(frozen=True)
class SloLimits:
    """p99 limits in seconds (None: not part of the SLO) and the attainment target (a share of windows)."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    attainment: float = 0.99

    def __post_init__(self) -> None:
        for name in METRICS:
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                raise ValueError(f"SLO {name.removesuffix('_s')} limit must be positive seconds, got {value!r}")
        if not 0 < self.attainment <= 1:
            raise ValueError(f"attainment target must be in (0, 1], got {self.attainment!r}")

    @property
    def given(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in METRICS if getattr(self, name) is not None}


@dataclass(frozen=True)
class Window:
    start_s: float
    requests: int
    unfinished: int
    p50: dict[str, float]
    p99: dict[str, float]
    met: bool | None            # None: fewer requests than the minimum, not judged
    ready_replicas_mean: float


@dataclass(frozen=True)
class Outcome:
    windows: tuple[Window, ...]
    attainment: float | None    # None: no window was judged
    meets_target: bool | None
    requests: int
    unfinished: int
    output_tokens: int
    replica_hours: float
    gpu_hours: float
    usd: float | None
    usd_per_day: float | None
    usd_per_million_tokens: float | None
    span_s: float
    p50: dict[str, float] | None = None   # over every request of the run (NaN: none finished)
    p99: dict[str, float] | None = None

    def to_dict(self) -> dict:
        return {
            "attainment": self.attainment, "meets_target": self.meets_target, "requests": self.requests,
            "unfinished": self.unfinished, "output_tokens": self.output_tokens, "replica_hours": self.replica_hours,
            "gpu_hours": self.gpu_hours, "usd": self.usd, "usd_per_day": self.usd_per_day,
            "usd_per_million_tokens": self.usd_per_million_tokens, "span_s": self.span_s,
            **{f"{m.removesuffix('_s')}_p50_s": (self.p50 or {}).get(m) for m in METRICS},
            **{f"{m.removesuffix('_s')}_p99_s": (self.p99 or {}).get(m) for m in METRICS},
            "windows": [{"start_s": w.start_s, "requests": w.requests, "unfinished": w.unfinished,
                         "ready_replicas_mean": w.ready_replicas_mean, "met": w.met,
                         **{f"{m.removesuffix('_s')}_p50_s": w.p50[m] for m in METRICS},
                         **{f"{m.removesuffix('_s')}_p99_s": w.p99[m] for m in METRICS}}
                        for w in self.windows],
        }


def _quantile(values: np.ndarray, q: float) -> float:
    """A quantile where NaN (never finished) counts as +inf; NaN when there are no values."""
    if not len(values):
        return math.nan
    return float(np.quantile(np.where(np.isnan(values), np.inf, values), q, method="higher"))


def outcome(run: FleetRun, slo: SloLimits, *, gpus_per_replica: int = 1, hourly_usd_per_gpu: float | None = None,
            window_s: float = 300.0, min_requests: int = 1) -> Outcome:
    if not window_s > 0:
        raise ValueError(f"window must be positive seconds, got {window_s!r}")
    series = {"ttft_s": run.ttft_s, "tpot_s": run.tpot_s, "e2e_s": run.e2e_s}
    last = float(run.send_s[-1]) if len(run.send_s) else 0.0
    edges = np.arange(int(last // window_s) + 2) * window_s     # every send inside one window
    index = (run.send_s // window_s).astype(np.int64)
    order = np.argsort(index, kind="stable")
    bounds = np.searchsorted(index[order], np.arange(len(edges)))
    limits = slo.given
    windows = []
    for k in range(len(edges) - 1):
        members = order[bounds[k]:bounds[k + 1]]
        unfinished = int(np.isnan(run.end_s[members]).sum())
        p50 = {m: _quantile(series[m][members], 0.50) for m in METRICS}
        p99 = {m: _quantile(series[m][members], 0.99) for m in METRICS}
        judged = len(members) >= min_requests and len(members) > 0
        met = all(p99[m] <= limit for m, limit in limits.items()) if judged else None
        times = edges[k] + (np.arange(10) + 0.5) * window_s / 10
        windows.append(Window(float(edges[k]), int(len(members)), unfinished, p50, p99, met,
                              float(run.ready_over_time(times).mean())))
    judged = [w for w in windows if w.met is not None]
    attainment = sum(w.met for w in judged) / len(judged) if judged else None
    finished = np.isfinite(run.end_s)
    tokens = int(run.output[finished].sum())
    replica_hours = run.replica_seconds() / 3600
    gpu_hours = replica_hours * gpus_per_replica
    usd = None if hourly_usd_per_gpu is None else gpu_hours * hourly_usd_per_gpu
    run_span = max(run.horizon_s, 1e-9)
    return Outcome(
        windows=tuple(windows), attainment=attainment,
        meets_target=None if attainment is None else attainment >= slo.attainment,
        requests=int(len(run.send_s)), unfinished=int((~finished).sum()), output_tokens=tokens,
        replica_hours=replica_hours, gpu_hours=gpu_hours, usd=usd,
        usd_per_day=None if usd is None else usd * 86400 / run_span,
        usd_per_million_tokens=None if usd is None or not tokens else usd / (tokens / 1e6),
        span_s=run_span, p50={m: _quantile(series[m], 0.50) for m in METRICS},
        p99={m: _quantile(series[m], 0.99) for m in METRICS})
