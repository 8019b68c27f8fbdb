"""KV-cache bytes per token and per request.

Per token, on one GPU:
    kv_bytes_per_token = 2 (K and V) x attention layers x kv heads per GPU x head_dim x bytes
  (vLLM's ``AttentionSpec.page_size_bytes / block_size``; Llama-3.1-8B BF16: 2*32*8*128*2 = 131,072;
  OPT-13B FP16: 2*40*40*128*2 = 819,200, the PagedAttention paper's "800 KB per token").
Tensor parallel splits kv heads over GPUs; when tp exceeds the kv heads each GPU holds a
replica of one head (vLLM's ``max(1, num_kv_heads // tp)``).
MLA (DeepSeek) caches one latent of kv_lora_rank + qk_rope_head_dim per layer, no factor 2,
replicated on every tensor-parallel GPU.
Sliding-window layers keep at most ceil(window / block) + 1 blocks per request; full layers
keep ceil(tokens / block) blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine_core.architecture import ModelArchitecture
from engine_core.dtypes import DType, parse_kv_dtype
from contract.checks import non_negative_int, positive_int


def kv_heads_per_gpu(arch: ModelArchitecture, tp: int = 1) -> int:
    """KV heads one tensor-parallel GPU stores; ValueError when tp cannot split the heads."""
    positive_int("tp", tp)
    if arch.num_heads % tp:
        raise ValueError(f"tp ({tp}) must divide num_heads ({arch.num_heads}) of {arch.name}")
    if arch.uses_mla:
        return 1
    if arch.num_kv_heads % tp and tp % arch.num_kv_heads:
        raise ValueError(f"tp ({tp}) and num_kv_heads ({arch.num_kv_heads}) must divide one another")
    return max(1, arch.num_kv_heads // tp)


def kv_bytes_per_token_per_layer(arch: ModelArchitecture, kv_dtype: str | DType = "bf16", tp: int = 1) -> float:
    """Bytes one token adds to one attention layer's cache on one GPU."""
    dt = kv_dtype if isinstance(kv_dtype, DType) else parse_kv_dtype(kv_dtype)
    heads = kv_heads_per_gpu(arch, tp)
    if arch.uses_mla:
        return (arch.kv_lora_rank + arch.qk_rope_head_dim) * dt.bytes_per_element
    return 2 * heads * arch.head_dim * dt.bytes_per_element


def kv_bytes_per_token(arch: ModelArchitecture, kv_dtype: str | DType = "bf16", tp: int = 1) -> int:
    """Bytes per token on one GPU across all layers (sliding-window layers counted in full)."""
    return round(arch.num_layers * kv_bytes_per_token_per_layer(arch, kv_dtype, tp))


def kv_block_bytes(arch: ModelArchitecture, kv_dtype: str | DType = "bf16", block_size: int = 16, tp: int = 1) -> int:
    """One paged block: ``block_size`` tokens across all layers, on one GPU."""
    positive_int("block_size", block_size)
    return block_size * kv_bytes_per_token(arch, kv_dtype, tp)


def kv_blocks_for_memory(arch: ModelArchitecture, memory_bytes: int, kv_dtype: str | DType = "bf16",
                        block_size: int = 16, tp: int = 1) -> int:
    """Whole KV blocks that `memory_bytes` of cache holds: floor(memory / kv_block_bytes), as vLLM sizes
    its paged cache (num_gpu_blocks = KV memory // bytes of one block across all layers)."""
    memory_bytes = positive_int("memory_bytes", memory_bytes)
    return memory_bytes // kv_block_bytes(arch, kv_dtype, block_size, tp)


def blocks_for_tokens(arch: ModelArchitecture, tokens: int, block_size: int = 16) -> tuple[int, int]:
    """(blocks in each full-attention layer, blocks in each sliding-window layer) for one sequence."""
    non_negative_int("tokens", tokens)
    positive_int("block_size", block_size)
    full = math.ceil(tokens / block_size)
    if arch.sliding_window is None or arch.num_sliding_window_layers == 0:
        return full, full
    return full, min(full, math.ceil(arch.sliding_window / block_size) + 1)


def kv_bytes_for_tokens(arch: ModelArchitecture, tokens: int, kv_dtype: str | DType = "bf16",
                        block_size: int = 16, tp: int = 1) -> int:
    """Cache bytes one sequence of ``tokens`` holds on one GPU, rounded up to whole blocks."""
    full_blocks, window_blocks = blocks_for_tokens(arch, tokens, block_size)
    per_layer_block = block_size * kv_bytes_per_token_per_layer(arch, kv_dtype, tp)
    window_layers = arch.num_sliding_window_layers if arch.sliding_window else 0
    full_layers = arch.num_layers - window_layers
    return round(per_layer_block * (full_layers * full_blocks + window_layers * window_blocks))


@dataclass(frozen=True)
class KvEstimate:
    """Result of ``kv`` (``--json`` keys are these field names)."""

    model: str
    kv_dtype: str
    tp: int
    block_size: int
    attention_layers: int
    kv_heads_per_gpu: int
    head_dim: int
    kv_bytes_per_token: int            # one GPU
    kv_bytes_per_token_all_gpus: int   # summed over the tp GPUs
    kv_block_bytes: int                # one GPU
    prompt_tokens: int
    output_tokens: int
    kv_bytes_per_request: int          # one GPU, whole blocks, sliding windows capped
    kv_bytes_per_request_all_gpus: int


def kv(arch: ModelArchitecture, kv_dtype: str | DType = "bf16", *, tp: int = 1,
       prompt_tokens: int = 0, output_tokens: int = 0, block_size: int = 16) -> KvEstimate:
    """KV-cache size per token and for one request of ``prompt_tokens + output_tokens``."""
    dt = kv_dtype if isinstance(kv_dtype, DType) else parse_kv_dtype(kv_dtype)
    non_negative_int("prompt_tokens", prompt_tokens)
    non_negative_int("output_tokens", output_tokens)
    per_token = kv_bytes_per_token(arch, dt, tp)
    per_request = kv_bytes_for_tokens(arch, prompt_tokens + output_tokens, dt, block_size, tp)
    return KvEstimate(
        model=arch.name, kv_dtype=dt.name, tp=tp, block_size=block_size,
        attention_layers=arch.num_layers, kv_heads_per_gpu=kv_heads_per_gpu(arch, tp), head_dim=arch.head_dim,
        kv_bytes_per_token=per_token, kv_bytes_per_token_all_gpus=per_token * tp,
        kv_block_bytes=kv_block_bytes(arch, dt, block_size, tp),
        prompt_tokens=prompt_tokens, output_tokens=output_tokens,
        kv_bytes_per_request=per_request, kv_bytes_per_request_all_gpus=per_request * tp,
    )
