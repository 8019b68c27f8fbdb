"""Roofline latency of one decode step and of a prefill (Williams et al. 2009, applied to LLM inference
as in "LLM Inference Unveiled: Survey and Roofline Model Insights", Yuan et al. 2024).

Decode step at batch B, mean context S, on one tensor-parallel GPU:
    bytes  = weights read (dense part + lm head + the experts the batch touches) + B x KV bytes of S tokens
             (MoE: a layer touches E x (1 - (1 - k/E)^B) of its E experts in expectation)
    flops  = 2 x active linear params x B + 4 x layers x heads x head_dim x S x B   (all / tp)
    step_s = overhead_s + max(bytes / (bandwidth x bandwidth_efficiency), flops / (peak x compute_efficiency))
    bound  = "memory" when the bandwidth term is the larger, else "compute"
Prefill of P prompt tokens (one request):
    flops  = 2 x active linear params x P + 2 x layers x heads x head_dim x P^2 (causal attention)
    bytes  = all weights + KV written for P tokens
Default efficiencies (assumptions; fit yours with ``calculators.calibrate``): decode kernels reach
about 80% of peak HBM bandwidth, large GEMMs about 50% of dense peak.
"""

from __future__ import annotations

from dataclasses import dataclass

from calculators.architecture import ModelArchitecture
from calculators.dtypes import default_kv_dtype, parse_dtype, parse_kv_dtype
from calculators.gpus import GpuSpec
from calculators.kv import kv_bytes_for_tokens, kv_heads_per_gpu
from calculators.weights import param_counts, weights

DEFAULT_BANDWIDTH_EFFICIENCY = 0.8
DEFAULT_COMPUTE_EFFICIENCY = 0.5


@dataclass(frozen=True)
class Roofline:
    """Result of ``roofline`` (``--json`` keys are these field names); per GPU, per step."""

    model: str
    gpu: str
    dtype: str
    kv_dtype: str
    tp: int
    batch: int
    context: int
    weight_bytes_read: int
    kv_bytes_read: int
    bytes_per_step: int
    flops_per_step: float
    arithmetic_intensity: float      # flops per byte of this step
    ridge_point: float               # flops per byte where the GPU turns compute bound
    memory_time_s: float
    compute_time_s: float
    decode_step_s: float
    decode_tokens_per_s: float
    bound: str
    prompt_tokens: int
    prefill_s: float
    prefill_bound: str
    bandwidth_efficiency: float
    compute_efficiency: float
    overhead_s: float


def _check_efficiency(value: float, field: str) -> None:
    if not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"{field} must be in (0, 1], got {value!r}")


def roofline(arch: ModelArchitecture, gpu: GpuSpec, *, dtype: str = "bf16", kv_dtype: str | None = None,
             batch: int = 1, context: int = 1024, prompt_tokens: int = 0, tp: int = 1,
             bandwidth_efficiency: float = DEFAULT_BANDWIDTH_EFFICIENCY,
             compute_efficiency: float = DEFAULT_COMPUTE_EFFICIENCY, overhead_s: float = 0.0) -> Roofline:
    """Decode step time at ``batch`` x ``context`` and prefill time of ``prompt_tokens`` (module docstring)."""
    dt = parse_dtype(dtype)
    kv_dt = parse_kv_dtype(kv_dtype if kv_dtype is not None else default_kv_dtype(dt))
    for value, field in ((batch, "batch"), (tp, "tp")):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{field} must be a positive integer, got {value!r}")
    for value, field in ((context, "context"), (prompt_tokens, "prompt_tokens")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{field} must be a non-negative integer, got {value!r}")
    _check_efficiency(bandwidth_efficiency, "bandwidth_efficiency")
    _check_efficiency(compute_efficiency, "compute_efficiency")
    if not isinstance(overhead_s, (int, float)) or overhead_s < 0:
        raise ValueError(f"overhead_s must be >= 0, got {overhead_s!r}")
    kv_heads_per_gpu(arch, tp)

    w = weights(arch, dt)
    counts = param_counts(arch)
    bandwidth = gpu.bandwidth_bytes_per_s * bandwidth_efficiency
    peak = gpu.peak_flops(dt) * compute_efficiency
    linear_active = counts.linear - counts.routed_experts + counts.active_routed_experts + arch.vocab_size * arch.hidden_size
    attn_width = arch.num_layers * arch.num_heads * arch.head_dim

    # decode
    touched = 1.0
    if arch.is_moe:
        share = arch.num_active_experts / arch.num_experts
        touched = 1 - (1 - share) ** batch
    dense_bytes = w.linear_bytes - w.routed_expert_bytes + w.lm_head_bytes
    weight_read = int((dense_bytes + w.routed_expert_bytes * touched) / tp + w.small_bytes)
    kv_read = batch * kv_bytes_for_tokens(arch, context, kv_dt, 1, tp)
    flops = (2 * linear_active * batch + 4 * attn_width * context * batch) / tp
    memory_s, compute_s = (weight_read + kv_read) / bandwidth, flops / peak
    step = overhead_s + max(memory_s, compute_s)

    # prefill
    prefill_flops = (2 * linear_active * prompt_tokens + 2 * attn_width * prompt_tokens ** 2) / tp
    prefill_bytes = w.bytes_per_gpu(tp) + kv_bytes_for_tokens(arch, prompt_tokens, kv_dt, 1, tp)
    prefill_memory_s, prefill_compute_s = prefill_bytes / bandwidth, prefill_flops / peak
    prefill = overhead_s + max(prefill_memory_s, prefill_compute_s) if prompt_tokens else 0.0
    total_bytes = weight_read + kv_read
    return Roofline(
        model=arch.name, gpu=gpu.name, dtype=dt.name, kv_dtype=kv_dt.name, tp=tp, batch=batch, context=context,
        weight_bytes_read=weight_read, kv_bytes_read=kv_read, bytes_per_step=total_bytes, flops_per_step=flops,
        arithmetic_intensity=flops / total_bytes, ridge_point=peak / bandwidth,
        memory_time_s=memory_s, compute_time_s=compute_s, decode_step_s=step, decode_tokens_per_s=batch / step,
        bound="memory" if memory_s >= compute_s else "compute", prompt_tokens=prompt_tokens, prefill_s=prefill,
        prefill_bound="memory" if prefill_memory_s >= prefill_compute_s else "compute",
        bandwidth_efficiency=bandwidth_efficiency, compute_efficiency=compute_efficiency, overhead_s=overhead_s,
    )
