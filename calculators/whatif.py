"""What a model will do on a GPU it has not run on: latencies and throughput, each with its error band.

For a closed loop of ``concurrency`` requests of ``prompt_tokens`` in and ``output_tokens`` out
(continuous batching, every request decoding together):
    ttft_idle       = prefill(prompt)                                   a request alone
    decode_step     = decode(batch = concurrency, context = prompt + output / 2)
    tpot            = decode_step + (concurrency - 1) x prefill(prompt) / output
                      (while one request emits its output, each of the others is replaced once,
                       and each replacement's prefill stalls the batch; ``steady_state_tpot``)
    request_latency = ttft_idle + (output - 1) x tpot
    output tok/s    = concurrency / tpot;   requests/s = output tok/s / output
Bands: decode and prefill bands of the efficiency profile (``calculators.efficiency``); a mix of both
(tpot, latency, throughput) carries their time-weighted mix. ``what_if`` is the pure function
``servecap predict``'s what-if calls with an efficiency profile (the user's, or the fitted default).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine_core.architecture import ModelArchitecture
from engine_core.dtypes import default_kv_dtype, parse_dtype, parse_kv_dtype
from calculators.efficiency import Efficiencies, ErrorBand
from calculators.efficiency_profile import EfficiencyProfile, efficiencies_for
from engine_core.gpus import GpuSpec
from calculators.kv import kv_heads_per_gpu
from calculators.moe_layout import PLAIN, MoeLayout
from calculators.step_cost import decode_cost, prefill_cost


def steady_state_tpot(decode_step_s: float, prefill_s: float, concurrency: int, output_tokens: int) -> float:
    """Mean time per output token of a closed loop at ``concurrency`` (module docstring)."""
    return decode_step_s + (concurrency - 1) * prefill_s / output_tokens


def mixed_band(parts: list[tuple[float, ErrorBand | None]]) -> ErrorBand | None:
    """The band of a sum of times, each with its own band: bands weighted by each time's share; named
    after the largest part."""
    if any(band is None for _, band in parts):
        return None
    total = sum(seconds for seconds, _ in parts) or 1.0
    relative = sum(seconds * band.relative for seconds, band in parts) / total
    median = sum(seconds * band.median for seconds, band in parts) / total
    kept = [(seconds, band) for seconds, band in parts if seconds > 0] or parts[:1]
    dominant = max(kept, key=lambda part: part[0])[1]
    scope = dominant.scope + (", mixed by time with the other phase's band" if len(kept) > 1 else "")
    return ErrorBand(relative=relative, median=median, points=sum(b.points for _, b in kept),
                     sources=max(b.sources for _, b in kept), scope=scope, basis=dominant.basis)


@dataclass(frozen=True)
class Banded:
    """A predicted value and the range its error band gives: value / (1 + band) to value x (1 + band)."""

    value: float
    low: float
    high: float
    band: str

    @classmethod
    def of(cls, value: float, band: ErrorBand | None) -> Banded:
        if band is None:
            return cls(value, value, value, "no published-point band")
        low, high = band.bounds(value)
        return cls(value, low, high, band.describe())


@dataclass(frozen=True)
class WhatIf:
    """Result of ``what_if`` (``--json`` keys are these field names); seconds unless named otherwise."""

    model: str
    gpu: str
    dtype: str
    kv_dtype: str
    tp: int
    engine: str | None
    concurrency: int
    prompt_tokens: int
    output_tokens: int
    ttft_idle_s: Banded
    decode_step_s: Banded
    tpot_s: Banded
    request_latency_s: Banded
    output_tokens_per_s: Banded
    requests_per_s: Banded
    efficiency_source: str


def what_if(arch: ModelArchitecture, gpu: GpuSpec, *, prompt_tokens: int, output_tokens: int, concurrency: int = 1,
            dtype: str = "bf16", kv_dtype: str | None = None, tp: int = 1, profile: EfficiencyProfile | None = None,
            engine: str | None = None, efficiency: Efficiencies | None = None, layout: MoeLayout = PLAIN) -> WhatIf:
    """Predicted latencies and throughput with bands (module docstring); ``profile`` defaults to the fit on
    published points, ``efficiency`` (already resolved numbers) replaces it. With an MoE ``layout``
    (calculators.moe_layout) the replacements come a rank's share at a time, one prompt on each rank at once
    (the ranks step together: a prefill on one stalls them all)."""
    for value, name in ((prompt_tokens, "prompt_tokens"), (output_tokens, "output_tokens"),
                        (concurrency, "concurrency")):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    dt = parse_dtype(dtype)
    kv_dt = parse_kv_dtype(kv_dtype if kv_dtype is not None else default_kv_dtype(dt))
    kv_heads_per_gpu(arch, tp)
    layout.check(arch, tp)
    eff = efficiencies_for(gpu, dt, layout.gpus(tp), profile=profile, engine=engine, efficiency=efficiency)
    prefill = prefill_cost(arch, gpu, dt, kv_dt, prompt_tokens=prompt_tokens, tp=tp, eff=eff, prompts=layout.dp,
                           layout=layout).total_s
    step = decode_cost(arch, gpu, dt, kv_dt, batch=concurrency, context=prompt_tokens + output_tokens / 2,
                       tp=tp, eff=eff, layout=layout).total_s
    tpot = steady_state_tpot(step, prefill, -(-concurrency // layout.dp), output_tokens)
    prefill_band, decode_band = eff.prefill_band_for(prompt_tokens), eff.decode_band_for(tp)
    stall = tpot - step
    tpot_band = mixed_band([(step, decode_band), (stall, prefill_band)])
    latency = prefill + (output_tokens - 1) * tpot
    latency_band = mixed_band([(prefill + (output_tokens - 1) * stall, prefill_band),
                               ((output_tokens - 1) * step, decode_band)])
    tokens_per_s = concurrency / tpot
    return WhatIf(
        model=arch.name, gpu=gpu.name, dtype=dt.name, kv_dtype=kv_dt.name, tp=tp, engine=engine,
        concurrency=concurrency, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
        ttft_idle_s=Banded.of(prefill, prefill_band), decode_step_s=Banded.of(step, decode_band),
        tpot_s=Banded.of(tpot, tpot_band), request_latency_s=Banded.of(latency, latency_band),
        output_tokens_per_s=Banded.of(tokens_per_s, tpot_band),
        requests_per_s=Banded.of(tokens_per_s / output_tokens, tpot_band),
        efficiency_source=eff.source,
    )
