"""Predicted decode step time and prefill time of a model on a GPU, with the error band they carry.

The terms (bytes, FLOPs, all-reduces) are ``calculators.step_cost``'s; the efficiencies and fixed costs
that turn them into seconds come from an efficiency profile (``calculators.efficiency``): by default the
one fitted on published engine measurements (``calculators/roofline_fit``), which also gives each
prediction its error band, e.g. "decode step 24.2 ms (±14%, from 31 published points on hopper fp8)".
A user's own profile (``servecap calc calibrate --roofline``) or explicit efficiencies replace it;
``calculators.efficiency.IDEAL`` gives the hardware lower bound.
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


@dataclass(frozen=True)
class Roofline:
    """Result of ``roofline`` (``--json`` keys are these field names); per GPU, per step."""

    model: str
    gpu: str
    dtype: str
    kv_dtype: str
    tp: int
    dp: int                          # data-parallel attention ranks (an MoE layout; 1: none)
    expert_parallel: bool
    batch: int                       # the replica's sequences (with dp ranks: spread over them)
    context: int
    decode_step: str                 # the step time with its band, as text
    prefill: str
    weight_bytes_read: int
    kv_bytes_read: int
    bytes_per_step: int
    flops_per_step: float
    arithmetic_intensity: float      # flops per byte of this step
    ridge_point: float               # flops per byte where the GPU turns compute bound (at these efficiencies)
    memory_time_s: float
    compute_time_s: float
    tp_comm_s: float                 # all-reduces of one decode step
    decode_overhead_s: float         # fixed + per-sequence cost of one step
    decode_step_s: float
    decode_tokens_per_s: float
    bound: str
    decode_step_band: ErrorBand | None
    prompt_tokens: int
    prefill_s: float
    prefill_bound: str
    prefill_tp_comm_s: float
    prefill_band: ErrorBand | None
    bandwidth_efficiency: float      # weights
    kv_bandwidth_efficiency: float
    compute_efficiency: float        # prefill
    decode_compute_efficiency: float
    overhead_s: float                # fixed cost of one decode step
    per_sequence_s: float
    prefill_overhead_s: float
    efficiency_source: str


def with_band(seconds: float, band: ErrorBand | None) -> str:
    """'24.2 ms (±14%, from 31 published points on hopper fp8)', or the time alone without a band."""
    text = f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"
    return f"{text} ({band.describe()})" if band is not None else f"{text} (no published-point band)"


def _check_counts(batch: int, tp: int, context: int, prompt_tokens: int) -> None:
    for value, field in ((batch, "batch"), (tp, "tp")):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{field} must be a positive integer, got {value!r}")
    for value, field in ((context, "context"), (prompt_tokens, "prompt_tokens")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{field} must be a non-negative integer, got {value!r}")


def roofline(arch: ModelArchitecture, gpu: GpuSpec, *, dtype: str = "bf16", kv_dtype: str | None = None,
             batch: int = 1, context: int = 1024, prompt_tokens: int = 0, tp: int = 1,
             profile: EfficiencyProfile | None = None, engine: str | None = None,
             efficiency: Efficiencies | None = None, bandwidth_efficiency: float | None = None,
             compute_efficiency: float | None = None, overhead_s: float | None = None,
             layout: MoeLayout = PLAIN) -> Roofline:
    """Decode step time at ``batch`` x ``context`` and prefill time of one ``prompt_tokens`` prompt
    (with an MoE ``layout``: ``batch`` is the replica's, the prefill one prompt on each rank at once, the times
    one GPU's; calculators.moe_layout).

    Efficiencies: ``efficiency`` as given, else ``profile`` (default: fitted on published points) for this
    GPU, dtype class, TP and ``engine``; ``bandwidth_efficiency``/``compute_efficiency``/``overhead_s``
    then override (and drop the published-point bands, which no longer describe the prediction).
    """
    dt = parse_dtype(dtype)
    kv_dt = parse_kv_dtype(kv_dtype if kv_dtype is not None else default_kv_dtype(dt))
    _check_counts(batch, tp, context, prompt_tokens)
    kv_heads_per_gpu(arch, tp)
    layout.check(arch, tp)
    eff = efficiencies_for(gpu, dt, layout.gpus(tp), profile=profile, engine=engine, efficiency=efficiency,
                           bandwidth=bandwidth_efficiency, compute=compute_efficiency, overhead_s=overhead_s)
    step = decode_cost(arch, gpu, dt, kv_dt, batch=batch, context=context, tp=tp, eff=eff, layout=layout)
    pre = prefill_cost(arch, gpu, dt, kv_dt, prompt_tokens=prompt_tokens, tp=tp, eff=eff, prompts=layout.dp,
                       layout=layout)
    total_bytes = step.weight_bytes + step.kv_bytes
    ridge = gpu.peak_flops(dt) * eff.decode_compute / (gpu.bandwidth_bytes_per_s * eff.weight_bandwidth)
    return Roofline(
        model=arch.name, gpu=gpu.name, dtype=dt.name, kv_dtype=kv_dt.name, tp=tp, dp=layout.dp,
        expert_parallel=layout.expert_parallel, batch=batch, context=context,
        decode_step=with_band(step.total_s, eff.decode_band_for(layout.gpus(tp))),
        prefill=with_band(pre.total_s, eff.prefill_band_for(prompt_tokens)) if prompt_tokens else "no prompt given",
        weight_bytes_read=step.weight_bytes, kv_bytes_read=step.kv_bytes, bytes_per_step=total_bytes,
        flops_per_step=step.flops, arithmetic_intensity=step.flops / total_bytes, ridge_point=ridge,
        memory_time_s=step.memory_s, compute_time_s=step.compute_s, tp_comm_s=step.comm_s,
        decode_overhead_s=step.overhead_s, decode_step_s=step.total_s, decode_tokens_per_s=batch / step.total_s,
        bound=step.bound, decode_step_band=eff.decode_band_for(layout.gpus(tp)), prompt_tokens=prompt_tokens, prefill_s=pre.total_s,
        prefill_bound=pre.bound, prefill_tp_comm_s=pre.comm_s, prefill_band=eff.prefill_band_for(prompt_tokens),
        bandwidth_efficiency=eff.weight_bandwidth, kv_bandwidth_efficiency=eff.kv_bandwidth,
        compute_efficiency=eff.prefill_compute, decode_compute_efficiency=eff.decode_compute,
        overhead_s=eff.decode_overhead_s, per_sequence_s=eff.per_sequence_s,
        prefill_overhead_s=eff.prefill_overhead_s, efficiency_source=eff.source,
    )
