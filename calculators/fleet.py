"""How many replicas serve a request rate within a p99 latency SLO.

A replica that runs up to ``slots`` requests at once and completes ``capacity_rps`` requests/s
when full is modelled as ``slots`` servers of service time slots / capacity_rps; the fleet of n
replicas is then a G/G/(n x slots) queue (Allen-Cunneen; exact Erlang C when both cv^2 are 1,
see ``calculators.queueing``). The answer is the smallest n whose response-time p99 meets the
SLO, with the utilization it implies.

``replica_from_roofline`` derives a replica for a model on a GPU (continuous batching, full batch):
    slots        = min(max_num_seqs, requests of prompt + output tokens the KV cache holds)
    cycle_s      = output_tokens x decode_step_s(batch = slots, context = prompt + output / 2)
                   + slots x prefill_s(prompt)      (each request is prefilled once per cycle)
    capacity_rps = slots / cycle_s, service time = cycle_s
Its error band is the decode and prefill bands weighted by their shares of the cycle; ``fleet`` then
also gives the replicas needed at both ends of that band (``replicas_range``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dataclasses import replace

from engine_core.architecture import ModelArchitecture
from calculators.efficiency import Efficiencies, ErrorBand
from calculators.efficiency_profile import EfficiencyProfile
from calculators.fit import fit
from engine_core.gpus import GpuSpec
from calculators.queueing import ggc, response_quantile
from calculators.roofline import roofline
from calculators.whatif import mixed_band


@dataclass(frozen=True)
class Replica:
    capacity_rps: float
    slots: int
    service_time_s: float
    tokens_per_s: float | None = None
    gpus: int = 1
    error_band: ErrorBand | None = None   # of service time and capacity, when predicted

    def __post_init__(self) -> None:
        if not self.capacity_rps > 0:
            raise ValueError(f"replica_capacity must be positive, got {self.capacity_rps!r}")
        if not isinstance(self.slots, int) or self.slots <= 0:
            raise ValueError(f"replica_slots must be a positive integer, got {self.slots!r}")
        if not isinstance(self.gpus, int) or self.gpus <= 0:
            raise ValueError(f"gpus per replica must be a positive integer, got {self.gpus!r}")


def replica(capacity_rps: float, slots: int = 1, *, gpus: int = 1, tokens_per_s: float | None = None) -> Replica:
    """A measured replica: its saturated request rate and how many requests it runs at once."""
    if not isinstance(capacity_rps, (int, float)) or not capacity_rps > 0:
        raise ValueError(f"replica_capacity must be positive, got {capacity_rps!r}")
    return Replica(capacity_rps, slots, slots / capacity_rps, tokens_per_s, gpus)


def replica_from_roofline(arch: ModelArchitecture, gpu: GpuSpec, *, dtype: str = "bf16", tp: int = 1,
                          prompt_tokens: int = 512, output_tokens: int = 256, max_num_seqs: int = 256,
                          gpu_memory_utilization: float = 0.9, max_model_len: int | None = None,
                          profile: EfficiencyProfile | None = None, engine: str | None = None,
                          efficiency: Efficiencies | None = None) -> Replica:
    """A replica as predicted by ``fit`` and ``roofline`` (module docstring; ``profile``/``engine``/
    ``efficiency`` as in ``roofline``)."""
    if isinstance(output_tokens, bool) or not isinstance(output_tokens, int) or output_tokens <= 0:
        raise ValueError(f"output_tokens must be a positive integer, got {output_tokens!r}")
    budget = fit(arch, gpu, dtype=dtype, gpus=tp, tp=tp, gpu_memory_utilization=gpu_memory_utilization,
                 max_model_len=max_model_len or min(arch.max_position_embeddings, 8192),
                 prompt_tokens=prompt_tokens, output_tokens=output_tokens)
    if not budget.fits or not budget.max_concurrency_at_mean:
        raise ValueError(f"model {arch.name} on {gpu.name}: {budget.reason}")
    slots = min(max_num_seqs, budget.max_concurrency_at_mean)
    step = roofline(arch, gpu, dtype=dtype, tp=tp, batch=slots, context=prompt_tokens + output_tokens // 2,
                    prompt_tokens=prompt_tokens, profile=profile, engine=engine, efficiency=efficiency)
    decode, prefill = output_tokens * step.decode_step_s, slots * step.prefill_s
    cycle = decode + prefill
    band = mixed_band([(decode, step.decode_step_band), (prefill, step.prefill_band)])
    return Replica(slots / cycle, slots, cycle, slots * output_tokens / cycle, tp, band)


@dataclass(frozen=True)
class FleetPlan:
    """``--json`` keys are these field names."""

    rate_rps: float
    slo_p99_s: float
    replica_capacity_rps: float
    replica_slots: int
    replicas: int
    gpus: int
    utilization: float
    response_p99_s: float
    mean_response_s: float
    p_wait: float
    rate_per_replica_at_slo: float   # the SLO operating point of one replica
    tokens_per_s: float | None
    error_band: str | None = None                # the replica's predicted-speed band, as text
    replicas_range: tuple[int | None, int | None] | None = None  # replicas needed at the fast and the slow end
                                                                 # of it (None: that end meets the SLO at no count)
    replicas_range_note: str | None = None       # why an end of the range is None


def _p99(rate: float, rep: Replica, replicas: int, arrival_cv2: float, service_cv2: float) -> float:
    if rate >= replicas * rep.capacity_rps:
        return math.inf
    return ggc(rate, 1 / rep.service_time_s, replicas * rep.slots,
               arrival_cv2=arrival_cv2, service_cv2=service_cv2).response_p99_s


def fleet(rate_rps: float, slo_p99_s: float, rep: Replica, *, arrival_cv2: float = 1.0,
          service_cv2: float = 1.0, max_replicas: int = 100_000) -> FleetPlan:
    """Fewest replicas of ``rep`` that carry ``rate_rps`` with response p99 <= ``slo_p99_s``."""
    if not isinstance(rate_rps, (int, float)) or not rate_rps > 0:
        raise ValueError(f"rate must be positive, got {rate_rps!r}")
    if not isinstance(slo_p99_s, (int, float)) or not slo_p99_s > 0:
        raise ValueError(f"slo_p99 must be positive, got {slo_p99_s!r}")
    floor_p99 = response_quantile(0.0, 0.0, rep.service_time_s, service_cv2)
    if floor_p99 > slo_p99_s:
        raise ValueError(f"slo_p99 {slo_p99_s * 1e3:g} ms is unreachable: a request alone takes "
                         f"{floor_p99 * 1e3:.1f} ms at p99 on an idle replica")
    low = max(1, math.floor(rate_rps / rep.capacity_rps))  # may fail the SLO
    if _p99(rate_rps, rep, low, arrival_cv2, service_cv2) <= slo_p99_s:
        high = low
    else:
        high = low + 1
        while _p99(rate_rps, rep, high, arrival_cv2, service_cv2) > slo_p99_s:
            low, high = high, high * 2
            if high > max_replicas:
                raise ValueError(f"rate {rate_rps:g} needs more than max_replicas ({max_replicas})")
        while high - low > 1:  # invariant: low fails, high meets the SLO
            mid = (low + high) // 2
            if _p99(rate_rps, rep, mid, arrival_cv2, service_cv2) <= slo_p99_s:
                high = mid
            else:
                low = mid
    result = ggc(rate_rps, 1 / rep.service_time_s, high * rep.slots, arrival_cv2=arrival_cv2, service_cv2=service_cv2)
    ends, note = _replicas_range(rate_rps, slo_p99_s, rep, arrival_cv2, service_cv2, max_replicas)
    return FleetPlan(
        rate_rps=rate_rps, slo_p99_s=slo_p99_s, replica_capacity_rps=rep.capacity_rps, replica_slots=rep.slots,
        replicas=high, gpus=high * rep.gpus, utilization=result.utilization, response_p99_s=result.response_p99_s,
        mean_response_s=result.mean_response_s, p_wait=result.p_wait,
        rate_per_replica_at_slo=max_rate_under_slo(rep, slo_p99_s, arrival_cv2=arrival_cv2, service_cv2=service_cv2),
        tokens_per_s=None if rep.tokens_per_s is None else rep.tokens_per_s * rate_rps / rep.capacity_rps,
        error_band=None if rep.error_band is None else rep.error_band.describe(),
        replicas_range=ends,
        replicas_range_note=note,
    )


def _replicas_range(rate_rps: float, slo_p99_s: float, rep: Replica, arrival_cv2: float, service_cv2: float,
                    max_replicas: int) -> tuple[tuple[int | None, int | None] | None, str | None]:
    """Replicas ``fleet`` needs if the replica is as fast / as slow as the ends of its error band, and why an
    end is None: at that end the SLO is met by no replica count (never the search's cap as an answer)."""
    if rep.error_band is None:
        return None, None
    ends, notes = [], []
    for name, factor in (("fast", 1 / (1 + rep.error_band.relative)), ("slow", 1 + rep.error_band.relative)):
        end = replace(rep, capacity_rps=rep.capacity_rps / factor, service_time_s=rep.service_time_s * factor,
                      error_band=None)
        try:
            ends.append(fleet(rate_rps, slo_p99_s, end, arrival_cv2=arrival_cv2, service_cv2=service_cv2,
                              max_replicas=max_replicas).replicas)
        except ValueError as exc:   # that end cannot meet the SLO at all
            ends.append(None)
            notes.append(f"at the {name} end of the band: {exc}")
    return (ends[0], ends[1]), "; ".join(notes) or None


def max_rate_under_slo(rep: Replica, slo_p99_s: float, *, arrival_cv2: float = 1.0, service_cv2: float = 1.0) -> float:
    """Highest request rate one replica carries with response p99 <= ``slo_p99_s`` (0 if none)."""
    def gap(rate: float) -> float:
        return _p99(rate, rep, 1, arrival_cv2, service_cv2) - slo_p99_s

    low, high = 1e-9 * rep.capacity_rps, rep.capacity_rps * (1 - 1e-9)
    if gap(low) > 0:
        return 0.0
    while high - low > 1e-6 * rep.capacity_rps:
        mid = (low + high) / 2
        low, high = (mid, high) if gap(mid) <= 0 else (low, mid)
    return low
