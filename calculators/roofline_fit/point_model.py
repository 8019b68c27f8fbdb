"""What the roofline predicts for one published point, under given efficiencies.

The metric decides the prediction (``calculators.roofline_fit.dataset`` for the definitions):
    decode_step   decode(batch, input + output / 2)
    ttft          prefill(1 prompt of input tokens)
    static_batch  prefill(batch prompts of input tokens) + (output - 1) x decode(batch, input + output / 2)
    loaded_itl    decode(C, input + output / 2) + (C - 1) x prefill(input) / output
``phase`` sorts a point for the validation tables: prefill (a TTFT, or a static batch whose prefill is
at least 60% of the ideal-hardware prediction), decode (a step or ITL, or a static batch at most 40%
prefill), else mixed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from engine_core.architecture import ModelArchitecture
from calculators.roofline_fit.dataset import PublishedPoint
from engine_core.dtypes import DType, parse_dtype, parse_kv_dtype
from calculators.efficiency import IDEAL, Efficiencies
from engine_core.gpus import GpuSpec, get_gpu
from engine_core.models import get_model
from calculators.step_cost import decode_cost, prefill_cost
from calculators.whatif import steady_state_tpot

PREFILL_PHASE_SHARE = 0.6
DECODE_PHASE_SHARE = 0.4


@dataclass(frozen=True)
class PointSetup:
    arch: ModelArchitecture
    gpu: GpuSpec
    dtype: DType
    kv_dtype: DType


@lru_cache(maxsize=None)
def setup_of(model: str, gpu: str, dtype: str, kv_dtype: str) -> PointSetup:
    return PointSetup(get_model(model), get_gpu(gpu), parse_dtype(dtype), parse_kv_dtype(kv_dtype))


def predicted_parts(point: PublishedPoint, eff: Efficiencies) -> tuple[float, float]:
    """(prefill seconds, decode seconds) of the point's prediction; their sum is the prediction."""
    s = setup_of(point.model, point.gpu, point.dtype, point.kv_dtype)
    args = (s.arch, s.gpu, s.dtype, s.kv_dtype)

    def decode(batch: int) -> float:
        return decode_cost(*args, batch=batch, context=point.mean_context, tp=point.tp, eff=eff).total_s

    def prefill(prompts: int) -> float:
        return prefill_cost(*args, prompt_tokens=point.input_tokens, tp=point.tp, eff=eff, prompts=prompts).total_s

    if point.metric == "decode_step":
        return 0.0, decode(point.batch)
    if point.metric == "ttft":
        return prefill(1), 0.0
    if point.metric == "static_batch":
        return prefill(point.batch), (point.output_tokens - 1) * decode(point.batch)
    step = decode(point.batch)   # loaded_itl: the others' prefills are the rest of the steady-state TPOT
    return steady_state_tpot(step, prefill(1), point.batch, point.output_tokens) - step, step


def predicted_s(point: PublishedPoint, eff: Efficiencies) -> float:
    return sum(predicted_parts(point, eff))


def phase(point: PublishedPoint) -> str:
    if point.metric == "ttft":
        return "prefill"
    if point.metric in ("decode_step", "loaded_itl"):
        return "decode"
    prefill, decode = predicted_parts(point, IDEAL)
    share = prefill / (prefill + decode)
    return "prefill" if share >= PREFILL_PHASE_SHARE else "decode" if share <= DECODE_PHASE_SHARE else "mixed"
