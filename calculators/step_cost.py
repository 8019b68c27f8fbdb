"""Bytes, FLOPs and seconds of one decode step and of one prefill, on one tensor-parallel GPU.

Decode step of ``batch`` sequences at mean context S (Williams et al. 2009 roofline, applied to LLM
inference as in Yuan et al. 2024, "LLM Inference Unveiled"):
    weight bytes = (dense linear + lm head + the experts the batch touches) / tp + norms
                   (MoE: a layer touches E x (1 - (1 - k/E)^B) of its E experts in expectation)
    KV bytes     = batch x KV bytes of S tokens x (1 + a x (query heads / KV heads - 1))
                   (a = gqa_kv_amplification: kernels that re-read a KV head once per query head)
    flops        = (2 x active linear params (lm head included) x batch
                    + 4 x layers x heads x head_dim x S x batch) / tp
    memory_s     = weight bytes / (bandwidth x weight eff) + KV bytes / (bandwidth x KV eff)
    compute_s    = flops / (peak x decode compute eff)
    step_s       = decode overhead + per-sequence cost x batch + max(memory_s, compute_s) + all-reduces of batch tokens
Prefill of ``prompts`` prompts of P tokens each:
    flops        = (2 x active linear params x prompts x P + 2 x lm head x prompts      (logits of the last token only)
                    + 2 x layers x heads x head_dim x P^2 x prompts) / tp                (causal attention)
    bytes        = weight bytes + KV written for prompts x P tokens
    prefill_s    = prefill overhead + max(bytes / (bandwidth x weight eff), flops / (peak x prefill compute eff))
                   + all-reduces of prompts x P tokens
With ``calculators.efficiency.IDEAL`` (every efficiency 1, no overhead, no all-reduce latency) each is
a lower bound on what hardware can do. Communication: ``calculators.tp_comm``.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine_core.architecture import ModelArchitecture
from engine_core.dtypes import DType
from calculators.efficiency import Efficiencies
from engine_core.gpus import GpuSpec
from calculators.kv import kv_bytes_for_tokens
from calculators.tp_comm import tp_comm_s
from calculators.weights import param_counts, weights


@dataclass(frozen=True)
class StepCost:
    """The terms of one decode step or one prefill (bytes and flops are per GPU)."""

    weight_bytes: int
    kv_bytes: int          # read by attention (decode) or written (prefill)
    flops: float
    memory_s: float
    compute_s: float
    comm_s: float
    overhead_s: float

    @property
    def total_s(self) -> float:
        return self.overhead_s + max(self.memory_s, self.compute_s) + self.comm_s

    @property
    def bound(self) -> str:
        return "memory" if self.memory_s >= self.compute_s else "compute"


ZERO = StepCost(0, 0, 0.0, 0.0, 0.0, 0.0, 0.0)


def _linear_active(arch: ModelArchitecture) -> int:
    """Linear parameters one token passes through, output head excluded."""
    counts = param_counts(arch)
    return counts.linear - counts.routed_experts + counts.active_routed_experts


def _weight_read(arch: ModelArchitecture, dt: DType, tp: int, batch: int) -> int:
    w = weights(arch, dt)
    touched = 1.0
    if arch.is_moe:
        touched = 1 - (1 - arch.num_active_experts / arch.num_experts) ** batch
    dense = w.linear_bytes - w.routed_expert_bytes + w.lm_head_bytes
    return int((dense + w.routed_expert_bytes * touched) / tp + w.small_bytes)


def decode_cost(arch: ModelArchitecture, gpu: GpuSpec, dt: DType, kv_dt: DType, *, batch: int, context: float,
                tp: int, eff: Efficiencies, tokens_per_seq: int = 1) -> StepCost:
    """One decode step of ``batch`` sequences at mean ``context`` tokens (module docstring).
    ``tokens_per_seq`` > 1: a speculative verification step, each sequence's last token and its
    k proposals in one pass: the weights and each sequence's KV are read once, while the FLOPs,
    the experts touched and the all-reduces grow with every token."""
    group = arch.num_heads / arch.num_kv_heads
    tokens = batch * tokens_per_seq
    kv = batch * kv_bytes_for_tokens(arch, round(context), kv_dt, 1, tp) * (1 + eff.gqa_kv_amplification * (group - 1))
    weight = _weight_read(arch, dt, tp, tokens)
    attn_width = arch.num_layers * arch.num_heads * arch.head_dim
    lm_head = arch.vocab_size * arch.hidden_size
    flops = (2 * (_linear_active(arch) + lm_head) * tokens + 4 * attn_width * context * tokens) / tp
    bandwidth = gpu.bandwidth_bytes_per_s
    return StepCost(
        weight_bytes=weight, kv_bytes=int(kv), flops=flops,
        memory_s=weight / (bandwidth * eff.weight_bandwidth) + kv / (bandwidth * eff.kv_bandwidth),
        compute_s=flops / (gpu.peak_flops(dt) * eff.decode_compute),
        comm_s=tp_comm_s(arch, gpu, tp, tokens, eff),
        overhead_s=eff.decode_overhead_s + eff.per_sequence_s * batch,
    )


def prefill_cost(arch: ModelArchitecture, gpu: GpuSpec, dt: DType, kv_dt: DType, *, prompt_tokens: int,
                 tp: int, eff: Efficiencies, prompts: int = 1) -> StepCost:
    """Prefill of ``prompts`` prompts of ``prompt_tokens`` each, in one pass (module docstring)."""
    if not prompt_tokens or not prompts:
        return ZERO
    tokens = prompts * prompt_tokens
    attn_width = arch.num_layers * arch.num_heads * arch.head_dim
    lm_head = arch.vocab_size * arch.hidden_size
    flops = (2 * _linear_active(arch) * tokens + 2 * lm_head * prompts
             + 2 * attn_width * prompt_tokens ** 2 * prompts) / tp
    weight = _weight_read(arch, dt, tp, tokens)
    kv = prompts * kv_bytes_for_tokens(arch, prompt_tokens, kv_dt, 1, tp)
    return StepCost(
        weight_bytes=weight, kv_bytes=kv, flops=flops,
        memory_s=(weight + kv) / (gpu.bandwidth_bytes_per_s * eff.weight_bandwidth),
        compute_s=flops / (gpu.peak_flops(dt) * eff.prefill_compute),
        comm_s=tp_comm_s(arch, gpu, tp, tokens, eff),
        overhead_s=eff.prefill_overhead_s,
    )
