"""The plan's questions, each answered by fleet runs (`calculators.plan.fleet`) over one demand.

- the plan as asked: its replicas over time, SLO per window, attainment and cost;
- the cheapest static fleet that meets the attainment target (the fixed fleet sized for the peak
  that the plan is compared with): a search over the replica count, attainment rising with it;
- N+1: the same plan with one replica lost at the demand's peak (the one holding the most requests);
- the breach probability: the share of seeded replications (router draws, step-time draws, and a
  synthetic demand's arrivals when the caller regenerates it) whose attainment misses the target;
- `search_targets`: the autoscaler target, over a grid, for the cheapest plan that meets the target.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from calculators.plan.demand import Demand
from calculators.plan.fleet import Fault, FleetConfig, run_fleet
from calculators.plan.fleet_run import FleetRun
from calculators.plan.outcome import Outcome, PlanSlo, outcome


@dataclass(frozen=True)
class Judged:
    config: FleetConfig
    run: FleetRun
    outcome: Outcome


def judge(demand: Demand, config: FleetConfig, slo: PlanSlo, *, window_s: float, min_requests: int = 1,
          on_progress: Callable[[int, int], None] | None = None) -> Judged:
    run = run_fleet(demand, config, on_progress)
    spec = config.replica
    return Judged(config, run, outcome(run, slo, gpus_per_replica=spec.gpus, hourly_usd_per_gpu=spec.hourly_usd_per_gpu,
                                       window_s=window_s, min_requests=min_requests))


def peak_time(demand: Demand, window_s: float) -> float:
    """The middle of the busiest window of send times (where losing a replica hurts most)."""
    if not len(demand):
        return 0.0
    counts = np.bincount((demand.t_s // window_s).astype(np.int64))
    return (int(np.argmax(counts)) + 0.5) * window_s


def n_plus_one(demand: Demand, config: FleetConfig, slo: PlanSlo, *, window_s: float,
               min_requests: int = 1) -> Judged:
    """The plan with the busiest replica killed at the demand's peak, besides any faults it already has."""
    fault = Fault(peak_time(demand, window_s))
    return judge(demand, replace(config, faults=(*config.faults, fault)), slo, window_s=window_s,
                 min_requests=min_requests)


def cheapest_static(demand: Demand, config: FleetConfig, slo: PlanSlo, *, window_s: float, max_replicas: int,
                    min_requests: int = 1, progress: Callable[[str], None] | None = None) -> Judged | None:
    """The fewest fixed replicas (no autoscaler) that meet the attainment target, by bisection over
    1..max_replicas; None when even max_replicas do not (said so, never the cap as an answer)."""
    static = replace(config, autoscaler=None, faults=())
    tried: dict[int, Judged] = {}

    def meets(n: int) -> bool:
        if n not in tried:
            if progress:
                progress(f"static fleet of {n}")
            tried[n] = judge(demand, replace(static, initial_replicas=n), slo, window_s=window_s,
                             min_requests=min_requests)
        return bool(tried[n].outcome.meets_target)

    if not meets(max_replicas):
        return None
    low, high = 0, max_replicas   # meets(high) holds; low fails (0 replicas serve nothing)
    while high - low > 1:
        middle = (low + high) // 2
        if meets(middle):
            high = middle
        else:
            low = middle
    return tried[high]


def breach_probability(make_demand: Callable[[int], Demand], config: FleetConfig, slo: PlanSlo, *,
                       replications: int, window_s: float, min_requests: int = 1) -> tuple[float, list[float]]:
    """(share of replications missing the target, each one's attainment); replication r reseeds the
    fleet with seed + r and asks `make_demand(r)` for its demand (a trace gives the same one)."""
    attainments = []
    for r in range(replications):
        judged = judge(make_demand(r), replace(config, seed=config.seed + r), slo, window_s=window_s,
                       min_requests=min_requests)
        attainments.append(judged.outcome.attainment if judged.outcome.attainment is not None else float("nan"))
    misses = [a < slo.attainment for a in attainments if a == a]
    return (sum(misses) / len(misses) if misses else float("nan")), attainments


def search_targets(demand: Demand, config: FleetConfig, slo: PlanSlo, targets: list[float], *, window_s: float,
                   min_requests: int = 1, progress: Callable[[str], None] | None = None) -> tuple[Judged | None, list]:
    """The autoscaler target among `targets` whose plan meets the attainment target at the least cost
    (GPU-hours when there is no price); (best or None, [(target, attainment, gpu_hours, usd)])."""
    if config.autoscaler is None:
        raise ValueError("--search target needs an autoscaler (give --min-replicas/--max-replicas)")
    best, rows = None, []
    for target in targets:
        if progress:
            progress(f"autoscaler target {target:g}")
        judged = judge(demand, replace(config, autoscaler=replace(config.autoscaler, target=target)), slo,
                       window_s=window_s, min_requests=min_requests)
        o = judged.outcome
        rows.append((target, o.attainment, o.gpu_hours, o.usd))
        if o.meets_target and (best is None or o.gpu_hours < best.outcome.gpu_hours):
            best = judged
    return best, rows
