"""A canary in the plan (`calculators.plan.canary`): the weight schedule, the seeded split under it, the
two pools' runs merged back into the demand's order, and every request counted once."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from calculators.plan.canary import CanarySchedule, canary_mask, merge_runs, plan_canary
from calculators.plan.demand import Demand
from calculators.plan.fleet import FleetConfig, ReplicaSpec
from calculators.plan.fleet_run import FleetRun, ReplicaLife
from calculators.plan.outcome import PlanSlo
from calculators.sim.step_model import StepTimeModel
from calculators.sim.workload import SimServer
from contract.slo import SLO

FAST = ReplicaSpec(SimServer.from_flags("continuous", num_kv_blocks=4000), StepTimeModel(base_s=0.01), 4000,
                   hourly_usd_per_gpu=2.0, describe="fast")
SLOW = replace(FAST, step_model=StepTimeModel(base_s=0.05), describe="slow")
SLO_TTFT = PlanSlo(SLO(ttft_ms=200), attainment=0.9)


def _demand(n: int, span_s: float) -> Demand:
    return Demand(t_s=np.linspace(0, span_s, n, endpoint=False), prompt=np.full(n, 64, dtype=np.int64),
                  output=np.full(n, 8, dtype=np.int64), session=np.full(n, -1, dtype=np.int64), prefix=None)


def test_a_schedule_is_one_weight_or_rising_steps_from_zero_and_says_what_is_wrong():
    assert CanarySchedule.parse("0.1").steps == ((0.0, 0.1),)
    schedule = CanarySchedule.parse("0:0.05,3600:0.1,7200:1")
    assert schedule.weight_at(np.array([0, 3599.9, 3600, 7199, 7200, 1e6])).tolist() == [0.05, 0.05, 0.1, 0.1, 1, 1]
    for text, says in (("1.5", "share in [0, 1]"), ("-0.1", "share in [0, 1]"), ("60:0.1", "starts at t = 0"),
                       ("0:0.1,0:0.2", "must rise"), ("0:0.1,60:x", "not a weight"), ("ten", "not a weight"),
                       ("0", "every request to one version"), ("0:1,60:1", "every request to one version")):
        with pytest.raises(ValueError, match=r"--canary-weight '.*': .*" + says.replace("[", r"\[").replace("]", r"\]")):
            CanarySchedule.parse(text)


def test_the_split_draws_each_request_under_the_weight_in_force_at_its_send_time():
    demand = _demand(20_000, 200.0)
    mask = canary_mask(demand, CanarySchedule.parse("0.1"), seed=3)
    assert abs(mask.mean() - 0.1) < 0.01
    assert np.array_equal(mask, canary_mask(demand, CanarySchedule.parse("0.1"), seed=3))   # seeded
    assert not np.array_equal(mask, canary_mask(demand, CanarySchedule.parse("0.1"), seed=4))
    stepped = canary_mask(demand, CanarySchedule.parse("0:0,100:1"), seed=3)
    assert np.array_equal(stepped, demand.t_s >= 100)
    # a bigger weight keeps every request the smaller one sent to the canary (one draw per request)
    assert np.all(canary_mask(demand, CanarySchedule.parse("0.3"), seed=3)[mask])


def test_runs_over_disjoint_shares_merge_back_in_the_demand_order_with_their_replicas_renumbered():
    def run(send, replica, lives, horizon, lost=None):
        send = np.asarray(send, dtype=float)
        return FleetRun(send_s=send, first_token_s=send + 0.1, end_s=send + 1, output=np.full(len(send), 4),
                        replica=np.asarray(replica), retried=np.zeros(len(send), dtype=bool),
                        lives=[ReplicaLife(i, 0.0, 0.0) for i in range(lives)], decisions=[(0.0, lives, lives)],
                        horizon_s=horizon, lost=lost)

    a = run([0.0, 2.0, 3.0], [0, 1, -1], lives=2, horizon=10, lost=np.array([False, False, True]))
    b = run([1.0, 4.0], [0, 0], lives=1, horizon=12)
    merged = merge_runs([(a, np.array([0, 2, 3])), (b, np.array([1, 4]))], 5)
    assert merged.send_s.tolist() == [0, 1, 2, 3, 4]
    assert merged.replica.tolist() == [0, 2, 1, -1, 2]
    assert [life.id for life in merged.lives] == [0, 1, 2]
    assert merged.lost.tolist() == [False, False, False, True, False]
    assert merged.horizon_s == 12 and merged.errored is None and merged.decisions == [(0.0, 2, 2)]


def test_a_canary_plan_judges_each_version_on_its_share_and_counts_every_request_once():
    demand = _demand(600, 120.0)
    primary = FleetConfig(replica=FAST, initial_replicas=2, cold_start_s=10)
    canary = replace(primary, replica=SLOW, initial_replicas=1)
    split = plan_canary(demand, primary, canary, CanarySchedule.parse("0:0.1,60:0.5"), SLO_TTFT, window_s=30, seed=1)
    assert split.primary.outcome.requests + split.canary.outcome.requests == split.both.requests == 600
    assert split.canary.outcome.requests == int(split.mask.sum())
    assert split.mask[demand.t_s < 60].mean() < 0.2 < 0.35 < split.mask[demand.t_s >= 60].mean()
    assert split.both.unfinished == split.both.failed == 0
    # the slow canary is slower where it serves; both versions' p99 lies between the two
    assert split.canary.outcome.p50["ttft_s"] > 2 * split.primary.outcome.p50["ttft_s"]
    assert split.primary.outcome.p99["ttft_s"] <= split.both.p99["ttft_s"] <= split.canary.outcome.p99["ttft_s"]
    # both pools are billed over the whole span: 3 replicas for 120 s at $2 an hour
    assert split.gpu_hours == pytest.approx(3 * 120 / 3600, rel=0.05)
    assert split.usd == pytest.approx(split.primary.outcome.usd + split.canary.outcome.usd)
    assert math.isclose(split.usd_per_day, 3 * 2.0 * 24)   # three replicas' day


def test_a_schedule_that_leaves_a_version_no_request_is_refused():
    demand = _demand(50, 10.0)
    primary = FleetConfig(replica=FAST)
    for weight, name in (("0.001", "canary"), ("0.999", "primary")):
        with pytest.raises(ValueError, match=f"leaves the {name} no request of the 50"):
            plan_canary(demand, primary, primary, CanarySchedule.parse(weight), SLO_TTFT, window_s=5, seed=0)


def test_the_split_drawn_again_gives_each_versions_attainment_per_draw_the_first_this_plans():
    demand = _demand(600, 120.0)
    primary = FleetConfig(replica=FAST, initial_replicas=1, cold_start_s=10)
    canary = replace(primary, replica=SLOW)
    schedule = CanarySchedule.parse("0.3")
    split = plan_canary(demand, primary, canary, schedule, SLO_TTFT, window_s=30, seed=1, splits=4)
    assert len(split.draws) == 4
    assert split.draws[0] == (split.primary.outcome.attainment, split.canary.outcome.attainment)
    again = plan_canary(demand, primary, canary, schedule, SLO_TTFT, window_s=30, seed=3)   # draw 2 is seed 1 + 2
    assert split.draws[2] == (again.primary.outcome.attainment, again.canary.outcome.attainment)
    spread = split.attainment_over_draws("canary")
    assert spread["draws"] == 4 and spread["min"] <= spread["median"] <= spread["max"]
    assert plan_canary(demand, primary, canary, schedule, SLO_TTFT, window_s=30, seed=1).draws == split.draws[:1]
