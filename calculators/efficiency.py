"""How close real engines get to the roofline: efficiencies, fixed costs and the error band they carry.

``Efficiencies`` is one resolved set of numbers for one (GPU, dtype, TP, engine); ``calculators.step_cost``
turns it into seconds; ``IDEAL`` (every efficiency 1, no cost) makes those seconds a hardware lower bound.
``ErrorBand`` says how far predictions made with fitted numbers fell from measurements they were not
fitted on. Where the numbers come from (profiles, the fitted default): ``calculators.efficiency_profile``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from engine_core.dtypes import DType, parse_dtype

ENGINES = ("tensorrt-llm", "vllm", "sglang", "lmdeploy", "gpt-fast")
LONG_PROMPT_TOKENS = 1000   # prefills of this many tokens and more carry the long-prompt error band


def dtype_class(dtype: str | DType) -> str:
    """Kernel family a weight format runs on: ``16bit`` (bf16/fp16/fp32), ``fp8``, ``int8`` or ``int4`` (every
    4-bit format with block scales: int4-gN, MXFP4, NVFP4; no published FP4 kernel points are fitted yet)."""
    dt = dtype if isinstance(dtype, DType) else parse_dtype(dtype)
    if dt.is_float:
        return "16bit"
    if dt.group_size is not None:
        return "int4"
    return dt.name


@dataclass(frozen=True)
class ErrorBand:
    """How far predictions of this kind fell from published measurements in leave-one-source-out validation.

    ``relative`` is the 80th percentile of |predicted / measured - 1| (four points in five fell inside);
    ``median`` the median of the same; ``scope`` names the points it was taken over and ``basis`` what
    they are (published points, or a user's own measured steps for a profile fitted on them).
    """

    relative: float
    median: float
    points: int
    sources: int
    scope: str
    basis: str = "published points"

    def __post_init__(self) -> None:
        if not self.relative >= 0 or not self.median >= 0 or self.points < 0 or self.sources < 0:
            raise ValueError(f"error band must be non-negative, got {self!r}")

    def describe(self) -> str:
        return f"±{self.relative:.0%}, from {self.points} {self.basis} on {self.scope}"

    def bounds(self, value: float) -> tuple[float, float]:
        """(low, high) of a time ``value`` within the band."""
        return value / (1 + self.relative), value * (1 + self.relative)


@dataclass(frozen=True)
class Efficiencies:
    """What fraction of each hardware ceiling the engine reaches, and its fixed costs.

    Attributes:
        weight_bandwidth: fraction of peak memory bandwidth while streaming weights (decode, small prefill).
        kv_bandwidth: fraction of peak memory bandwidth while attention streams the KV cache.
        prefill_compute: fraction of the dense tensor peak a prefill's GEMMs reach.
        decode_compute: fraction of the dense tensor peak a decode step's GEMMs reach (large batches).
        decode_overhead_s: fixed cost of one decode step.
        per_sequence_s: added cost per sequence in a decode step (sampling, scheduling, bookkeeping).
        prefill_overhead_s: fixed cost of one prefill.
        allreduce_latency_s: fixed cost of one tensor-parallel all-reduce.
        link_efficiency: fraction of the interconnect bandwidth an all-reduce reaches.
        gqa_kv_amplification: 0 = attention reads each KV head once; 1 = once per query head (kernels that
            do not share KV across a grouped-query group); in between, a mix.
        tp_comm_measured: True when these numbers were measured at this TP degree, so the all-reduce cost is
            already inside them and the separate communication term is skipped.
        source: where the numbers come from, for output.
        decode_band, tp_decode_band, prefill_band, short_prefill_band: the published-point error band of
            decode steps on one GPU and with tensor parallelism, of prefills of 1k+ token prompts and of shorter
            prefills (fixed costs dominate those), if any.
    """

    weight_bandwidth: float
    kv_bandwidth: float
    prefill_compute: float
    decode_compute: float
    decode_overhead_s: float = 0.0
    per_sequence_s: float = 0.0
    prefill_overhead_s: float = 0.0
    allreduce_latency_s: float = 0.0
    link_efficiency: float = 1.0
    gqa_kv_amplification: float = 0.0
    tp_comm_measured: bool = False
    source: str = ""
    decode_band: ErrorBand | None = None
    tp_decode_band: ErrorBand | None = None
    prefill_band: ErrorBand | None = None
    short_prefill_band: ErrorBand | None = None

    def __post_init__(self) -> None:
        for name in ("weight_bandwidth", "kv_bandwidth", "prefill_compute", "decode_compute", "link_efficiency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value!r}")
        for name in ("decode_overhead_s", "per_sequence_s", "prefill_overhead_s", "allreduce_latency_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or math.isinf(value):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if not 0 <= self.gqa_kv_amplification <= 1:
            raise ValueError(f"gqa_kv_amplification must be in [0, 1], got {self.gqa_kv_amplification!r}")

    def decode_band_for(self, tp: int) -> ErrorBand | None:
        return self.tp_decode_band if tp > 1 and self.tp_decode_band is not None else self.decode_band

    def prefill_band_for(self, prompt_tokens: int) -> ErrorBand | None:
        return self.prefill_band if prompt_tokens >= LONG_PROMPT_TOKENS else self.short_prefill_band

    def overridden(self, *, bandwidth: float | None = None, compute: float | None = None,
                   overhead_s: float | None = None) -> Efficiencies:
        """These numbers with a user's own values on top; the published-point bands no longer apply."""
        if bandwidth is None and compute is None and overhead_s is None:
            return self
        for value, name in ((bandwidth, "bandwidth_efficiency"), (compute, "compute_efficiency")):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not 0 < value <= 1):
                raise ValueError(f"{name} must be in (0, 1], got {value!r}")
        if overhead_s is not None and (isinstance(overhead_s, bool) or not isinstance(overhead_s, (int, float))
                                       or not 0 <= overhead_s < math.inf):
            raise ValueError(f"overhead_s must be >= 0, got {overhead_s!r}")
        changes: dict = {"decode_band": None, "tp_decode_band": None, "prefill_band": None, "short_prefill_band": None,
                         "source": f"{self.source}, overridden"}
        if bandwidth is not None:
            changes.update(weight_bandwidth=bandwidth, kv_bandwidth=bandwidth)
        if compute is not None:
            changes.update(prefill_compute=compute, decode_compute=compute)
        if overhead_s is not None:
            changes.update(decode_overhead_s=overhead_s, prefill_overhead_s=overhead_s, per_sequence_s=0.0)
        return replace(self, **changes)


IDEAL = Efficiencies(weight_bandwidth=1.0, kv_bandwidth=1.0, prefill_compute=1.0, decode_compute=1.0,
                     source="ideal hardware (every efficiency 1, no overhead): a lower bound")
