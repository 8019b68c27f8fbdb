"""Number formats: how many bytes one stored element takes.

Weights may be stored in any format here; the KV cache only in the plain ones
(fp32, bf16, fp16, fp8, int8). ``int4-gN`` is 4-bit group quantization (GPTQ/AWQ
style): every group of N weights shares one fp16 scale and one 4-bit zero point,
so a weight costs ``4 + (16 + 4) / N`` bits (int4-g128: 4.15625 bits). Sources:
GPTQ (Frantar et al. 2022) and AWQ (Lin et al. 2023) checkpoints store ``scales``
as fp16 and ``qzeros`` packed at 4 bits.

The 4-bit floating-point microscaling formats store E2M1 elements in blocks that share a scale:
``mxfp4`` one 8-bit power-of-two (E8M0) scale per 32 elements, 4.25 bits a weight (OCP
Microscaling Formats (MX) Specification v1.0, 2023, section 5: MXFP4 block size 32, scale E8M0;
gpt-oss checkpoints store ``*_blocks`` and ``*_scales`` so); ``nvfp4`` one FP8 (E4M3) scale per
16 elements plus one FP32 scale per tensor, 4.5 bits (NVIDIA, "Introducing NVFP4 for Efficient and
Accurate Low-Precision Inference", 2025; TensorRT Model Optimizer's NVFP4 checkpoints: ``weight``
packed 2 a byte, ``weight_scale`` FP8 per 16, ``weight_scale_2`` FP32 per tensor).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# canonical name -> bytes per element
_PLAIN_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0}
# torch-style names the engine uses
_ALIASES = {
    "float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
    "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "float8": "fp8",
}
_GROUP_QUANT = re.compile(r"int4-g(\d+)")
# 4-bit float microscaling: name -> (elements a scale covers, bits of that scale)
_MICROSCALING = {"mxfp4": (32, 8), "nvfp4": (16, 8)}
_SCALE_BITS = 16      # fp16 scale per group
_ZERO_POINT_BITS = 4  # packed 4-bit zero point per group


@dataclass(frozen=True)
class DType:
    """A storage format. ``bits_per_element`` includes group-quantization overhead."""

    name: str
    bits_per_element: float
    group_size: int | None = None

    @property
    def bytes_per_element(self) -> float:
        return self.bits_per_element / 8

    @property
    def is_float(self) -> bool:
        """fp32/bf16/fp16: non-linear parameters (norms, router) also stored this way."""
        return self.name in ("fp32", "bf16", "fp16")

    @property
    def is_quantized(self) -> bool:
        return not self.is_float


def dtype_names() -> list[str]:
    return [*_PLAIN_BYTES, "int4-g128", *_MICROSCALING]


def parse_dtype(name: str, *, field: str = "dtype") -> DType:
    """``DType`` for a name such as ``bf16``, ``bfloat16``, ``int4-g128``; ValueError names ``field``."""
    if not isinstance(name, str):
        raise ValueError(f"{field} must be a string such as 'bf16', got {name!r}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key in _PLAIN_BYTES:
        return DType(key, _PLAIN_BYTES[key] * 8)
    if key in _MICROSCALING:
        block, scale_bits = _MICROSCALING[key]
        return DType(key, 4 + scale_bits / block, group_size=block)
    match = _GROUP_QUANT.fullmatch(key)
    if match:
        group = int(match.group(1))
        if group <= 0:
            raise ValueError(f"{field}: group size must be positive in {name!r}")
        return DType(key, 4 + (_SCALE_BITS + _ZERO_POINT_BITS) / group, group_size=group)
    raise ValueError(
        f"unknown {field} {name!r}; choose one of {', '.join(dtype_names())} "
        "(aliases float32, bfloat16, float16; any int4-gN)"
    )


def parse_kv_dtype(name: str, *, field: str = "kv_dtype") -> DType:
    """Like ``parse_dtype`` but only formats a KV cache is stored in (no group quantization)."""
    dtype = parse_dtype(name, field=field)
    if dtype.group_size is not None:
        raise ValueError(f"{field} {name!r} is not a KV cache format; choose fp32, bf16, fp16, fp8 or int8")
    return dtype


def default_kv_dtype(dtype: str | DType) -> str:
    """vLLM's ``--kv-cache-dtype auto``: the model's float format; bf16 when the weights are quantized."""
    dt = dtype if isinstance(dtype, DType) else parse_dtype(dtype)
    return dt.name if dt.is_float else "bf16"
