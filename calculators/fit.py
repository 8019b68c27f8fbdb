"""Does a model fit on a GPU, and how many tokens / requests does the KV cache then hold?

vLLM's budget rule (``gpu_worker.determine_available_memory``), per GPU:
    kv_cache_bytes = usable memory x gpu_memory_utilization
                     - weights (this GPU's tensor-parallel shard)
                     - activation peak (profiled forward pass at max_num_batched_tokens)
                     - non-torch memory (CUDA context, cuBLAS workspaces, NCCL buffers)
                     - LoRA slots, with max_loras (``calculators.lora.slot_bytes``)
    num_blocks     = kv_cache_bytes // kv_block_bytes           (block = block_size tokens, all layers)
    kv_tokens      = num_blocks x block_size
    max_concurrency (vLLM's "Maximum concurrency for L tokens per request")
                   = kv_cache_bytes / kv bytes of one max_model_len request

Defaults (assumptions, override with activation_gib / non_torch_gib):
    activation peak = max_num_batched_tokens x (2 x MLP width / tp + 4 x hidden) x activation bytes
                      + max_num_seqs x vocab / tp x 4 (fp32 logits of the sampler)
    non-torch       = 0.5 GiB at tp = 1, 1.0 GiB with NCCL at tp > 1
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine_core.architecture import ModelArchitecture
from engine_core.dtypes import DType, default_kv_dtype, parse_dtype, parse_kv_dtype
from engine_core.gpus import GIB, GpuSpec
from calculators.kv import kv_block_bytes, kv_bytes_for_tokens, kv_heads_per_gpu
from calculators.lora import slot_bytes
from calculators.weights import weights


def default_activation_bytes(arch: ModelArchitecture, dtype: DType, tp: int = 1,
                             max_num_batched_tokens: int = 8192, max_num_seqs: int = 256) -> int:
    """The activation-peak assumption in the module docstring."""
    act_bytes = 4 if dtype.name == "fp32" else 2
    mlp_width = max(arch.intermediate_size, arch.expert_intermediate_size * arch.num_active_experts)
    per_token = (2 * mlp_width / tp + 4 * arch.hidden_size) * act_bytes
    logits = max_num_seqs * arch.vocab_size / tp * 4
    return int(max_num_batched_tokens * per_token + logits)


def default_non_torch_bytes(tp: int = 1) -> int:
    return int((0.5 if tp == 1 else 1.0) * GIB)


def num_blocks_for_budget(arch: ModelArchitecture, kv_cache_bytes: int, kv_dtype: str | DType = "bf16",
                          block_size: int = 16, tp: int = 1) -> int:
    """Whole KV blocks a byte budget holds on one GPU (what an engine given a memory budget allocates)."""
    if kv_cache_bytes < 0:
        raise ValueError(f"kv_cache_bytes must be >= 0, got {kv_cache_bytes!r}")
    return int(kv_cache_bytes // kv_block_bytes(arch, kv_dtype, block_size, tp))


@dataclass(frozen=True)
class Fit:
    """Result of ``fit`` (``--json`` keys are these field names); bytes are per GPU."""

    model: str
    gpu: str
    dtype: str
    kv_dtype: str
    gpus: int
    tp: int
    dp: int                                # data-parallel attention ranks a replica (MoE; 1: none)
    replicas: int
    gpu_memory_utilization: float
    usable_bytes: int
    budget_bytes: int
    weight_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    lora_bytes: int                        # LoRA slots (max_loras x max_lora_rank on every target), 0 without
    kv_cache_bytes: int
    block_size: int
    kv_block_bytes: int
    num_blocks: int
    kv_tokens: int
    max_model_len: int
    max_concurrency: float                 # requests of max_model_len tokens, per replica
    mean_request_tokens: int | None
    max_concurrency_at_mean: int | None    # requests of prompt+output tokens, per replica
    max_concurrency_total: float           # all replicas, at max_model_len
    fits: bool
    reason: str


def _check(value: float, field: str, *, low: float = 0.0, inclusive: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) \
            or (value < low if inclusive else value <= low):
        raise ValueError(f"{field} must be {'>=' if inclusive else '>'} {low}, got {value!r}")


def fit(arch: ModelArchitecture, gpu: GpuSpec, *, dtype: str = "bf16", kv_dtype: str | None = None,
        gpus: int = 1, tp: int = 1, gpu_memory_utilization: float = 0.9,
        activation_gib: float | None = None, non_torch_gib: float | None = None,
        block_size: int = 16, max_model_len: int | None = None,
        prompt_tokens: int | None = None, output_tokens: int | None = None,
        keep_embeddings_16bit: bool = False, max_num_batched_tokens: int = 8192, max_num_seqs: int = 256,
        max_loras: int = 0, max_lora_rank: int = 16, dp: int = 1) -> Fit:
    """Apply the budget rule of the module docstring; ``fits`` is False (with ``reason``) when nothing is left.
    ``dp``: data-parallel attention ranks of an MoE replica (calculators.moe_layout): a GPU holds its rank's
    share of the rest and 1 / (tp x dp) of the routed experts; the replica's requests are dp ranks' worth."""
    dt = parse_dtype(dtype)
    kv_dt = parse_kv_dtype(kv_dtype if kv_dtype is not None else default_kv_dtype(dt))
    _check(gpus, "gpus")
    _check(tp, "tp")
    _check(dp, "dp")
    if not isinstance(gpus, int) or not isinstance(tp, int) or gpus % (tp * dp):
        raise ValueError(f"gpus ({gpus}) must be a whole multiple of tp ({tp})" + (f" x dp ({dp})" if dp > 1 else ""))
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization!r}")
    kv_heads_per_gpu(arch, tp)  # validates tp against the heads
    max_model_len = arch.max_position_embeddings if max_model_len is None else max_model_len
    _check(max_model_len, "max_model_len")
    if max_model_len > arch.max_position_embeddings:
        raise ValueError(f"max_model_len ({max_model_len}) exceeds {arch.name}'s "
                         f"max_position_embeddings ({arch.max_position_embeddings})")
    for value, field in ((activation_gib, "activation_gib"), (non_torch_gib, "non_torch_gib")):
        if value is not None:
            _check(value, field, inclusive=True)
    if (prompt_tokens is None) != (output_tokens is None):
        raise ValueError("prompt_tokens and output_tokens must be given together")
    if prompt_tokens is not None:
        _check(prompt_tokens, "prompt_tokens", inclusive=True)
        _check(output_tokens, "output_tokens", inclusive=True)
        if prompt_tokens + output_tokens <= 0:
            raise ValueError("prompt_tokens + output_tokens must be positive")

    usable = gpu.usable_bytes
    budget = int(usable * gpu_memory_utilization)
    weight = weights(arch, dt, keep_embeddings_16bit=keep_embeddings_16bit).bytes_per_gpu(tp, dp)
    activation = (int(activation_gib * GIB) if activation_gib is not None
                  else default_activation_bytes(arch, dt, tp, max_num_batched_tokens, max_num_seqs))
    non_torch = int(non_torch_gib * GIB) if non_torch_gib is not None else default_non_torch_bytes(tp)
    lora = slot_bytes(arch, max_loras, max_lora_rank, dt.name, tp) if max_loras else 0
    kv_cache = budget - weight - activation - non_torch - lora
    block = kv_block_bytes(arch, kv_dt, block_size, tp)
    num_blocks = max(0, kv_cache // block)
    kv_cache = max(0, kv_cache)
    per_max_request = kv_bytes_for_tokens(arch, max_model_len, kv_dt, block_size, tp)
    max_concurrency = dp * kv_cache / per_max_request
    mean_tokens = None if prompt_tokens is None else prompt_tokens + output_tokens
    at_mean = None if mean_tokens is None else dp * int(kv_cache // kv_bytes_for_tokens(arch, mean_tokens, kv_dt,
                                                                                         block_size, tp))

    if num_blocks == 0:
        need = (weight + activation + non_torch + lora) / GIB
        adapters = f" + LoRA slots {lora / GIB:.2f} GiB" if lora else ""
        fits, reason = False, (f"does not fit: weights {weight / GIB:.2f} GiB + activations {activation / GIB:.2f} GiB "
                               f"+ non-torch {non_torch / GIB:.2f} GiB{adapters} = {need:.2f} GiB per GPU, but only "
                               f"{budget / GIB:.2f} GiB is budgeted ({gpu_memory_utilization:g} x {usable / GIB:.2f} GiB)")
    elif max_concurrency / dp < 1:   # a request lives on one rank
        fits, reason = False, (f"does not fit: the KV cache holds {num_blocks * block_size} tokens, fewer than one "
                               f"request of max_model_len {max_model_len}; lower max_model_len or add GPUs")
    else:
        fits, reason = True, f"fits: {num_blocks} blocks, {max_concurrency:.2f} requests of {max_model_len} tokens"
    replicas = gpus // (tp * dp)
    return Fit(
        model=arch.name, gpu=gpu.name, dtype=dt.name, kv_dtype=kv_dt.name, gpus=gpus, tp=tp, dp=dp, replicas=replicas,
        gpu_memory_utilization=gpu_memory_utilization, usable_bytes=usable, budget_bytes=budget,
        weight_bytes=weight, activation_bytes=activation, non_torch_bytes=non_torch, lora_bytes=lora,
        kv_cache_bytes=kv_cache,
        block_size=block_size, kv_block_bytes=block, num_blocks=num_blocks, kv_tokens=num_blocks * block_size,
        max_model_len=max_model_len, max_concurrency=round(max_concurrency, 3), mean_request_tokens=mean_tokens,
        max_concurrency_at_mean=at_mean, max_concurrency_total=round(max_concurrency * replicas, 3),
        fits=fits, reason=reason,
    )
