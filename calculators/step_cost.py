"""Bytes, FLOPs and seconds of one decode step and of one prefill, on one tensor-parallel GPU.

Decode step of ``batch`` sequences at mean context S (Williams et al. 2009 roofline, applied to LLM
inference as in Yuan et al. 2024, "LLM Inference Unveiled"):
    weight bytes = (dense linear + lm head + the experts the batch touches) / tp + norms
                   (MoE: a layer touches E x (1 - (1 - k/E)^B) of its E experts in expectation)
    KV bytes     = batch x KV bytes of S tokens x (1 + a x (query heads / KV heads - 1))
                   (a = gqa_kv_amplification: kernels that re-read a KV head once per query head)
    flops        = (2 x active linear params (lm head included) x batch
                    + 2 x layers x heads x (QK + PV width) x S x batch) / tp
                   (QK + PV width: 2 x head_dim; MLA decodes in its latent space, the up-projections
                    absorbed into the query and output, as vLLM's MLA backend and FlashMLA run it: a query
                    head reads kv_lora_rank + rope dims for its scores and kv_lora_rank for its values,
                    DeepSeek-V2 report section 2.1.2)
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

An MoE replica with data-parallel attention or expert parallelism (``layout``, ``calculators.moe_layout``):
``batch`` is the replica's, spread evenly over its dp ranks; per GPU the attention side (its KV, its
FLOPs, its dense weights / tp) takes batch / dp, the routed experts' weights and FLOPs are / (tp x dp), and
the communication is the layout's (all-to-alls with expert parallelism).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine_core.architecture import ModelArchitecture
from engine_core.dtypes import DType
from calculators.efficiency import Efficiencies
from engine_core.gpus import GpuSpec
from calculators.kv import kv_bytes_for_tokens
from calculators.moe_layout import PLAIN, MoeLayout
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


def _linear_flops(arch: ModelArchitecture, tokens: float, tp: int, layout: MoeLayout) -> float:
    """2 x the linear parameters `tokens` pass through (output head excluded), per GPU: the ranks' layers
    on tokens / dp over tp, the routed experts over every GPU."""
    if layout.plain:
        return 2 * _linear_active(arch) * tokens / tp
    routed = param_counts(arch).active_routed_experts
    return 2 * ((_linear_active(arch) - routed) * tokens / layout.dp / tp + routed * tokens / layout.gpus(tp))


def _weight_read(arch: ModelArchitecture, dt: DType, tp: int, batch: int, layout: MoeLayout = PLAIN) -> int:
    w = weights(arch, dt)
    touched = 1.0
    if arch.is_moe:
        touched = 1 - (1 - arch.num_active_experts / arch.num_experts) ** batch
    dense = w.linear_bytes - w.routed_expert_bytes + w.lm_head_bytes
    if layout.plain:
        return int((dense + w.routed_expert_bytes * touched) / tp + w.small_bytes)
    return int(dense / tp + w.routed_expert_bytes * touched / layout.gpus(tp) + w.small_bytes)


def _decode_attention_width(arch: ModelArchitecture) -> int:
    """Dims a query head multiplies per context token in decode: scores and values (module docstring)."""
    if arch.uses_mla:
        return 2 * arch.kv_lora_rank + arch.qk_rope_head_dim
    return 2 * arch.head_dim


def attention_flops_per_context_token(arch: ModelArchitecture, tp: int) -> float:
    """FLOPs one decoding sequence spends on one token of its context, per tensor-parallel GPU (all layers)."""
    return 2 * arch.num_layers * arch.num_heads * _decode_attention_width(arch) / tp


def _comm_s(arch: ModelArchitecture, gpu: GpuSpec, tp: int, tokens: int, eff: Efficiencies,
            layout: MoeLayout) -> float:
    return tp_comm_s(arch, gpu, tp, tokens, eff) if layout.plain else layout.comm_s(arch, gpu, tp, tokens, eff)


def decode_cost(arch: ModelArchitecture, gpu: GpuSpec, dt: DType, kv_dt: DType, *, batch: int, context: float,
                tp: int, eff: Efficiencies, tokens_per_seq: int = 1, layout: MoeLayout = PLAIN) -> StepCost:
    """One decode step of ``batch`` sequences at mean ``context`` tokens (module docstring).
    ``tokens_per_seq`` > 1: a speculative verification step, each sequence's last token and its
    k proposals in one pass: the weights and each sequence's KV are read once, while the FLOPs,
    the experts touched and the all-reduces grow with every token."""
    group = arch.num_heads / arch.num_kv_heads
    tokens = batch * tokens_per_seq
    local = batch / layout.dp   # the sequences of one attention rank
    kv = local * kv_bytes_for_tokens(arch, round(context), kv_dt, 1, tp) * (1 + eff.gqa_kv_amplification * (group - 1))
    weight = _weight_read(arch, dt, tp, tokens, layout)
    lm_head = arch.vocab_size * arch.hidden_size
    local_tokens = local * tokens_per_seq
    flops = (_linear_flops(arch, tokens, tp, layout) + 2 * lm_head * local_tokens / tp
             + attention_flops_per_context_token(arch, tp) * context * local_tokens)
    bandwidth = gpu.bandwidth_bytes_per_s
    return StepCost(
        weight_bytes=weight, kv_bytes=int(kv), flops=flops,
        memory_s=weight / (bandwidth * eff.weight_bandwidth) + kv / (bandwidth * eff.kv_bandwidth),
        compute_s=flops / (gpu.peak_flops(dt) * eff.decode_compute),
        comm_s=_comm_s(arch, gpu, tp, tokens, eff, layout),
        overhead_s=eff.decode_overhead_s + eff.per_sequence_s * local,
    )


def prefill_cost(arch: ModelArchitecture, gpu: GpuSpec, dt: DType, kv_dt: DType, *, prompt_tokens: int,
                 tp: int, eff: Efficiencies, prompts: int = 1, layout: MoeLayout = PLAIN) -> StepCost:
    """Prefill of ``prompts`` prompts of ``prompt_tokens`` each, in one pass (module docstring; with a
    layout, the prompts spread evenly over its ranks)."""
    if not prompt_tokens or not prompts:
        return ZERO
    tokens = prompts * prompt_tokens
    local = prompts / layout.dp
    attn_width = arch.num_layers * arch.num_heads * arch.head_dim
    lm_head = arch.vocab_size * arch.hidden_size
    flops = (_linear_flops(arch, tokens, tp, layout)
             + (2 * lm_head * local + 2 * attn_width * prompt_tokens ** 2 * local) / tp)
    weight = _weight_read(arch, dt, tp, tokens, layout)
    kv = int(local * kv_bytes_for_tokens(arch, prompt_tokens, kv_dt, 1, tp))
    return StepCost(
        weight_bytes=weight, kv_bytes=kv, flops=flops,
        memory_s=(weight + kv) / (gpu.bandwidth_bytes_per_s * eff.weight_bandwidth),
        compute_s=flops / (gpu.peak_flops(dt) * eff.prefill_compute),
        comm_s=_comm_s(arch, gpu, tp, tokens, eff, layout),
        overhead_s=eff.prefill_overhead_s,
    )
