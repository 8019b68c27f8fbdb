"""Planning curves: how many requests fit as the context grows, and what a token costs as utilization rises.

Max concurrency vs context (vLLM's "Maximum concurrency for L tokens per request", per replica):
    kv_cache_bytes  = the budget ``calculators.fit`` leaves for the KV cache on one GPU
    max_concurrency = kv_cache_bytes // KV bytes of one request of L tokens (whole blocks,
                      sliding windows capped), capped at ``max_num_seqs``
Cost vs utilization, for one replica (``calculators.fleet.Replica``) at utilization u:
    rate_rps      = u x capacity_rps,  tokens_per_s = u x tokens_per_s at capacity
    usd_per_1m    = 1e6 x hourly x gpus / (3600 x tokens_per_s)
    response_p99  = p99 of the replica as a G/G/slots queue (``calculators.queueing.ggc``)
Cost falls as 1/u while the p99 climbs and diverges at u = 1: the SLO picks the point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engine_core.architecture import ModelArchitecture
from calculators.cost import usd_per_million_tokens
from calculators.fit import fit
from calculators.fleet import Replica
from engine_core.gpus import GpuSpec
from calculators.kv import kv_bytes_for_tokens
from calculators.queueing import ggc


@dataclass(frozen=True)
class ConcurrencyPoint:
    """Requests of ``context_tokens`` one replica's KV cache holds at once."""

    context_tokens: int
    kv_bytes_per_request: int     # one GPU
    max_concurrency: int          # per replica, capped at max_num_seqs
    kv_limited: bool              # False when max_num_seqs, not memory, is the cap


def max_concurrency_vs_context(arch: ModelArchitecture, gpu: GpuSpec, contexts: Sequence[int], *,
                               dtype: str = "bf16", kv_dtype: str | None = None, tp: int = 1,
                               gpu_memory_utilization: float = 0.9, block_size: int = 16,
                               max_num_seqs: int = 256) -> list[ConcurrencyPoint]:
    """One ``ConcurrencyPoint`` per context length (module docstring); ValueError if the model does not fit."""
    if not contexts:
        raise ValueError("contexts must name at least one context length")
    for value in contexts:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"contexts must be positive integers, got {value!r}")
    if isinstance(max_num_seqs, bool) or not isinstance(max_num_seqs, int) or max_num_seqs <= 0:
        raise ValueError(f"max_num_seqs must be a positive integer, got {max_num_seqs!r}")
    budget = fit(arch, gpu, dtype=dtype, kv_dtype=kv_dtype, gpus=tp, tp=tp,
                 gpu_memory_utilization=gpu_memory_utilization, block_size=block_size,
                 max_model_len=max(contexts), max_num_seqs=max_num_seqs)
    if budget.num_blocks == 0:
        raise ValueError(f"model {arch.name} on {gpu.name}: {budget.reason}")
    points = []
    for context in sorted(contexts):
        per_request = kv_bytes_for_tokens(arch, context, budget.kv_dtype, block_size, tp)
        by_memory = budget.kv_cache_bytes // per_request
        points.append(ConcurrencyPoint(context, per_request, int(min(by_memory, max_num_seqs)),
                                       by_memory < max_num_seqs))
    return points


@dataclass(frozen=True)
class UtilizationPoint:
    """One replica run at ``utilization`` of its capacity."""

    utilization: float
    rate_rps: float
    tokens_per_s: float
    usd_per_million_tokens: float
    response_p99_s: float


def cost_vs_utilization(rep: Replica, hourly_usd: float, utilizations: Sequence[float], *,
                        arrival_cv2: float = 1.0, service_cv2: float = 1.0) -> list[UtilizationPoint]:
    """One ``UtilizationPoint`` per utilization in (0, 1) (module docstring)."""
    if rep.tokens_per_s is None:
        raise ValueError("the replica needs tokens_per_s (e.g. from replica_from_roofline) to price tokens")
    if not utilizations:
        raise ValueError("utilizations must name at least one value in (0, 1)")
    points = []
    for u in sorted(utilizations):
        if isinstance(u, bool) or not isinstance(u, (int, float)) or not 0 < u < 1:
            raise ValueError(f"utilizations must be in (0, 1) (1 is an unstable queue), got {u!r}")
        rate = u * rep.capacity_rps
        queue = ggc(rate, 1 / rep.service_time_s, rep.slots, arrival_cv2=arrival_cv2, service_cv2=service_cv2)
        tokens = u * rep.tokens_per_s
        points.append(UtilizationPoint(u, rate, tokens, usd_per_million_tokens(hourly_usd, rep.gpus, tokens),
                                       queue.response_p99_s))
    return points
