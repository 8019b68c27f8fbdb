"""LoRA adapters' bytes: one adapter's, and the GPU slots an engine reserves for them.

    adapter_bytes(arch, rank, dtype="bf16", targets=ALL_TARGETS) -> bytes of one adapter's A and B matrices
    slot_bytes(arch, max_loras, max_lora_rank, dtype, tp)      -> per GPU, what `--max-loras` slots take

An adapter on projection p of every layer holds A [rank, in_p] and B [out_p, rank]: rank x (in_p + out_p)
elements. vLLM reserves `max_loras` slots of `max_lora_rank` on every target before sizing the KV cache
(in the model's float dtype; quantized weights keep their adapters in bf16), so the slots come out of
the KV room whether or not adapters are loaded. Under tensor parallelism each GPU holds its shard of
the slots (the A or B side is split with its layer). Pure: the architecture only.
"""

from __future__ import annotations

from engine_core.architecture import ModelArchitecture
from engine_core.dtypes import default_kv_dtype, parse_dtype

ALL_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def projection_shapes(arch: ModelArchitecture) -> dict[str, tuple[int, int]]:
    """(in, out) features of each projection of one layer."""
    q, kv = arch.num_heads * arch.head_dim, arch.num_kv_heads * arch.head_dim
    d, i = arch.hidden_size, arch.intermediate_size
    return {"q_proj": (d, q), "k_proj": (d, kv), "v_proj": (d, kv), "o_proj": (q, d),
            "gate_proj": (d, i), "up_proj": (d, i), "down_proj": (i, d)}


def adapter_bytes(arch: ModelArchitecture, rank: int, dtype: str = "bf16",
                  targets: tuple[str, ...] = ALL_TARGETS) -> int:
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"rank must be a positive integer, got {rank!r}")
    shapes = projection_shapes(arch)
    unknown = [t for t in targets if t not in shapes]
    if unknown:
        raise ValueError(f"LoRA target(s) {', '.join(unknown)}: choose from {', '.join(ALL_TARGETS)}")
    elements = arch.num_layers * sum(rank * sum(shapes[t]) for t in targets)
    return int(elements * parse_dtype(dtype).bytes_per_element)


def slot_bytes(arch: ModelArchitecture, max_loras: int, max_lora_rank: int, dtype: str = "bf16", tp: int = 1) -> int:
    """Per GPU: `max_loras` slots of rank `max_lora_rank` on every target, in the model's float format."""
    if isinstance(max_loras, bool) or not isinstance(max_loras, int) or max_loras < 1:
        raise ValueError(f"max_loras must be a positive integer, got {max_loras!r}")
    lora_dtype = default_kv_dtype(dtype)   # the float format: the weights' own, bf16 for quantized ones
    return -(-max_loras * adapter_bytes(arch, max_lora_rank, lora_dtype) // tp)
