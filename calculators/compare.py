"""One model across GPUs and precisions: what fits, how fast, how many GPUs, what a token costs.

For every (gpu, dtype) pair, at a target request rate under a p99 SLO:
    tp            = the smallest of ``tp_choices`` for which ``fit`` leaves room for at least one
                    request of prompt + output tokens (and tp divides the heads)
    replica       = ``replica_from_roofline`` (continuous batching, full batch) on tp GPUs
    fleet         = ``fleet(rate, slo, replica)``: fewest replicas meeting the p99 SLO
    usd_per_1m    = 1e6 x hourly x fleet GPUs / (3600 x rate x output_tokens)   (output tokens sold)
A pair that fits at no tp, or whose SLO is out of reach, is kept as a row with ``fits`` or
``reason`` saying why, so the table shows every cell of the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engine_core.architecture import ModelArchitecture
from calculators.cost import usd_per_million_tokens
from calculators.fit import fit
from calculators.fleet import fleet, replica_from_roofline
from engine_core.dtypes import parse_dtype
from engine_core.gpus import GIB, GpuSpec
from calculators.kv import kv_heads_per_gpu
from calculators.roofline import roofline


@dataclass(frozen=True)
class Deployment:
    """One row of the comparison; None where the pair does not fit or the SLO is unreachable."""

    model: str
    gpu: str
    dtype: str
    tp: int | None
    fits: bool
    weights_gib_per_gpu: float | None
    kv_cache_gib_per_gpu: float | None
    max_concurrency: int | None          # requests of prompt + output tokens per replica
    decode_step_ms: float | None         # at full batch
    prefill_ms: float | None             # one prompt
    replica_tokens_per_s: float | None   # output tokens/s of one saturated replica
    speed_band_pct: float | None         # the replica speed's published-point error band, percent
    replicas: int | None
    gpus: int | None
    utilization: float | None
    response_p99_s: float | None
    usd_per_hour: float | None
    usd_per_million_output_tokens: float | None
    reason: str


def _smallest_tp(arch: ModelArchitecture, gpu: GpuSpec, dtype: str, tp_choices: Sequence[int],
                 max_model_len: int, prompt_tokens: int, output_tokens: int, gpu_memory_utilization: float):
    """(tp, Fit) for the first tp that holds one request, else (None, reason of the largest tp tried)."""
    reason = "no tp choice divides the model's heads"
    for tp in sorted(tp_choices):
        try:
            kv_heads_per_gpu(arch, tp)
        except ValueError as exc:  # tp does not split the heads: try the next one
            reason = str(exc)
            continue
        budget = fit(arch, gpu, dtype=dtype, gpus=tp, tp=tp, gpu_memory_utilization=gpu_memory_utilization,
                     max_model_len=max_model_len, prompt_tokens=prompt_tokens, output_tokens=output_tokens)
        if budget.fits and budget.max_concurrency_at_mean:
            return tp, budget
        reason = f"tp={tp}: {budget.reason}"
    return None, reason


def compare_deployments(arch: ModelArchitecture, gpus: Sequence[GpuSpec], dtypes: Sequence[str], *,
                        rate_rps: float, slo_p99_s: float, prompt_tokens: int = 512, output_tokens: int = 256,
                        max_model_len: int = 8192, tp_choices: Sequence[int] = (1, 2, 4, 8),
                        gpu_memory_utilization: float = 0.9, max_num_seqs: int = 256,
                        arrival_cv2: float = 1.0, service_cv2: float = 1.0) -> list[Deployment]:
    """Rows for every (gpu, dtype) pair, gpus outer, dtypes inner (module docstring).

    ``arrival_cv2``/``service_cv2`` are the squared coefficients of variation ``fleet`` queues with
    (1 = Poisson arrivals / exponential service; fixed output lengths make service nearer 0)."""
    if not gpus or not dtypes or not tp_choices:
        raise ValueError("gpus, dtypes and tp_choices must each name at least one entry")
    rows = []
    for gpu in gpus:
        if gpu.hourly_usd is None:
            raise ValueError(f"gpu {gpu.name!r} has no hourly_usd: give one with get_gpu(..., hourly_usd=)")
        for dtype in (parse_dtype(name).name for name in dtypes):
            tp, budget = _smallest_tp(arch, gpu, dtype, tp_choices, max_model_len, prompt_tokens, output_tokens,
                                      gpu_memory_utilization)
            if tp is None:
                rows.append(Deployment(arch.name, gpu.name, dtype, None, False, *([None] * 13), reason=budget))
                continue
            rep = replica_from_roofline(arch, gpu, dtype=dtype, tp=tp, prompt_tokens=prompt_tokens,
                                        output_tokens=output_tokens, max_num_seqs=max_num_seqs,
                                        gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len)
            step = roofline(arch, gpu, dtype=dtype, tp=tp, batch=rep.slots,
                            context=prompt_tokens + output_tokens // 2, prompt_tokens=prompt_tokens)
            common = dict(model=arch.name, gpu=gpu.name, dtype=dtype, tp=tp, fits=True,
                          weights_gib_per_gpu=budget.weight_bytes / GIB,
                          kv_cache_gib_per_gpu=budget.kv_cache_bytes / GIB, max_concurrency=rep.slots,
                          decode_step_ms=step.decode_step_s * 1e3, prefill_ms=step.prefill_s * 1e3,
                          replica_tokens_per_s=rep.tokens_per_s,
                          speed_band_pct=None if rep.error_band is None else 100 * rep.error_band.relative)
            try:
                plan = fleet(rate_rps, slo_p99_s, rep, arrival_cv2=arrival_cv2, service_cv2=service_cv2)
            except ValueError as exc:  # the SLO is shorter than one request on an idle replica
                rows.append(Deployment(**common, replicas=None, gpus=None, utilization=None, response_p99_s=None,
                                       usd_per_hour=None, usd_per_million_output_tokens=None, reason=str(exc)))
                continue
            rows.append(Deployment(
                **common, replicas=plan.replicas, gpus=plan.gpus, utilization=plan.utilization,
                response_p99_s=plan.response_p99_s, usd_per_hour=gpu.hourly_usd * plan.gpus,
                usd_per_million_output_tokens=usd_per_million_tokens(gpu.hourly_usd, plan.gpus,
                                                                     rate_rps * output_tokens),
                reason=f"{plan.replicas} x tp={tp} meets p99 {slo_p99_s:g} s at {rate_rps:g} req/s"))
    return rows
