"""The engine step-time model the simulator runs on.

    step_s = base_s + per_seq_s x sequences in the batch
             + per_prefill_token_s x prompt tokens processed this step
             + per_context_token_s x context tokens attended this step

``jitter`` (optional) is the measured spread around that mean: factors measured / modelled step
time, from which the simulator draws one per step (a shared CPU or a throttling GPU is not
deterministic; p50 TTFT sees single steps, TPOT averages many, so both need the spread).

Fit it to measured steps with ``calculators.calibrate.fit_step_model``, or derive it for a GPU
with ``from_roofline`` (memory-bound decode: the weights are read once per step, each sequence
adds its KV read; prefill tokens cost their matmul FLOPs).
"""

from __future__ import annotations

from dataclasses import dataclass

from calculators.architecture import ModelArchitecture
from calculators.gpus import GpuSpec


@dataclass(frozen=True)
class StepTimeModel:
    base_s: float
    per_seq_s: float = 0.0
    per_prefill_token_s: float = 0.0
    per_context_token_s: float = 0.0
    jitter: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if any(not isinstance(f, (int, float)) or not f > 0 for f in self.jitter):
            raise ValueError("jitter factors must be positive numbers")
        object.__setattr__(self, "jitter", tuple(float(f) for f in self.jitter))
        for name in ("base_s", "per_seq_s", "per_prefill_token_s", "per_context_token_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        if self.base_s + self.per_seq_s + self.per_prefill_token_s <= 0:
            raise ValueError("base_s, per_seq_s and per_prefill_token_s cannot all be zero")

    def step_s(self, sequences: int, prefill_tokens: int = 0, context_tokens: int = 0) -> float:
        return (self.base_s + self.per_seq_s * sequences + self.per_prefill_token_s * prefill_tokens
                + self.per_context_token_s * context_tokens)


def step_model_from_roofline(arch: ModelArchitecture, gpu: GpuSpec, *, dtype: str = "bf16", tp: int = 1,
                             bandwidth_efficiency: float = 0.8, compute_efficiency: float = 0.5,
                             overhead_s: float = 0.0) -> StepTimeModel:
    """A ``StepTimeModel`` from the roofline terms (see ``calculators.roofline``).

    base_s = overhead + weights read / bandwidth (batch 1, no context);
    per_context_token_s = KV bytes of one token / bandwidth;
    per_prefill_token_s = 2 x active params / compute (prefill is compute bound).
    """
    from calculators.roofline import roofline  # local: roofline imports nothing from here

    one = roofline(arch, gpu, dtype=dtype, batch=1, context=0, prompt_tokens=0, tp=tp,
                   bandwidth_efficiency=bandwidth_efficiency, compute_efficiency=compute_efficiency,
                   overhead_s=overhead_s)
    long = roofline(arch, gpu, dtype=dtype, batch=1, context=4096, prompt_tokens=4096, tp=tp,
                    bandwidth_efficiency=bandwidth_efficiency, compute_efficiency=compute_efficiency)
    per_token_kv = long.kv_bytes_read / 4096 / (gpu.bandwidth_bytes_per_s * bandwidth_efficiency)
    per_prefill = (long.prefill_s) / 4096
    return StepTimeModel(base_s=one.decode_step_s, per_seq_s=0.0,
                         per_prefill_token_s=per_prefill, per_context_token_s=per_token_kv)
