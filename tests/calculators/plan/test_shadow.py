"""A shadow in the plan (`calculators.plan.shadow`): the mirrored fraction, production unchanged by it, and
the shadow judged on its copies alone."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from calculators.plan.demand import Demand
from calculators.plan.fleet import FleetConfig, ReplicaSpec
from calculators.plan.outcome import PlanSlo
from calculators.plan.planner import judge
from calculators.plan.shadow import check_fraction, mirror_mask, plan_shadow
from calculators.sim.step_model import StepTimeModel
from calculators.sim.workload import SimServer
from contract.slo import SLO

FAST = ReplicaSpec(SimServer.from_flags("continuous", num_kv_blocks=4000), StepTimeModel(base_s=0.01), 4000,
                   hourly_usd_per_gpu=2.0)
SLOW = replace(FAST, step_model=StepTimeModel(base_s=0.05))
SLO_TTFT = PlanSlo(SLO(ttft_ms=200), attainment=0.9)


def _demand(n: int, span_s: float) -> Demand:
    return Demand(t_s=np.linspace(0, span_s, n, endpoint=False), prompt=np.full(n, 64, dtype=np.int64),
                  output=np.full(n, 8, dtype=np.int64), session=np.full(n, -1, dtype=np.int64), prefix=None)


def test_a_fraction_is_a_share_in_zero_to_one_and_all_of_it_mirrors_every_request():
    for bad in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"--shadow-fraction is the share of requests mirrored, in \(0, 1\]"):
            check_fraction(bad)
    demand = _demand(10_000, 100.0)
    assert mirror_mask(demand, 1.0, seed=2).all()
    assert abs(mirror_mask(demand, 0.25, seed=2).mean() - 0.25) < 0.02


def test_production_runs_as_without_the_shadow_and_the_shadow_is_judged_on_its_copies():
    demand = _demand(400, 40.0)
    production = FleetConfig(replica=FAST, initial_replicas=1)
    shadow = replace(production, replica=SLOW)
    mirrored = plan_shadow(demand, production, shadow, fraction=0.5, slo=SLO_TTFT, window_s=10, seed=1)
    alone = judge(demand, production, SLO_TTFT, window_s=10)
    assert np.array_equal(mirrored.production.run.end_s, alone.run.end_s)   # the shadow takes nothing from it
    assert mirrored.production.outcome.requests == 400
    assert mirrored.shadow.outcome.requests == int(mirrored.mask.sum()) and 150 < mirrored.mask.sum() < 250
    assert mirrored.shadow.outcome.p50["ttft_s"] > 2 * mirrored.production.outcome.p50["ttft_s"]
    assert mirrored.shadow.outcome.gpu_hours == pytest.approx(40 / 3600, rel=0.05)   # its one replica, billed too
