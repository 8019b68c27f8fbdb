"""A fallback tier in the plan (`calculators.plan.fallback`): nginx's rule (a primary at its `max_conns`
depth, or an error status passed on), the requests that leave and when, the fallback's pool run on them,
and every request counted once, by the tier that answered it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from calculators.plan.demand import Demand
from calculators.plan.fallback import FallbackRule, fallback_demand, plan_fallback
from calculators.plan.fleet import FleetConfig, ReplicaSpec, run_fleet
from calculators.plan.outcome import PlanSlo
from calculators.plan.resilience import ReplicaErrors, RouterResilience
from calculators.sim.step_model import StepTimeModel
from calculators.sim.workload import SimServer
from contract.slo import SLO

PRIMARY = ReplicaSpec(SimServer.from_flags("continuous", num_kv_blocks=4000), StepTimeModel(base_s=0.01), 4000,
                      hourly_usd_per_gpu=4.0, describe="primary")
SMALL = replace(PRIMARY, step_model=StepTimeModel(base_s=0.002), hourly_usd_per_gpu=1.0, describe="small")
SLO_TTFT = PlanSlo(SLO(ttft_ms=200), attainment=0.9)


def _demand(t_s, output: int = 8) -> Demand:
    n = len(t_s)
    return Demand(t_s=np.asarray(t_s, dtype=float), prompt=np.full(n, 16, dtype=np.int64),
                  output=np.full(n, output, dtype=np.int64), session=np.full(n, -1, dtype=np.int64), prefix=None)


def test_the_rule_is_a_depth_errors_or_both_and_a_bad_one_is_named():
    assert FallbackRule.parse("depth:32") == FallbackRule(32, False)
    assert FallbackRule.parse("errors") == FallbackRule(None, True)
    assert FallbackRule.parse("depth:4,errors").spec() == "depth:4,errors"
    for text, says in (("depth:0", "at least 1"), ("depth:x", "takes an integer"), ("queue:3", "not depth:N or errors"),
                       ("errors,errors", "once each"), ("", "not depth:N or errors")):
        with pytest.raises(ValueError, match=f"--fallback '{text}': .*{says}"):
            FallbackRule.parse(text)
    with pytest.raises(ValueError, match="needs a trigger"):
        FallbackRule()


def test_a_request_that_finds_the_primary_at_its_depth_leaves_at_once_and_one_after_it_drains_stays():
    # one replica, depth 2: the third of three sent together leaves; a fourth, sent when the first two are
    # answered (8 steps of 10 ms), finds room again
    demand = _demand([0.0, 0.001, 0.002, 0.5])
    config = FleetConfig(replica=PRIMARY, fallback=FallbackRule(2))
    run = run_fleet(demand, config)
    assert np.isnan(run.left_s[[0, 1, 3]]).all() and run.left_s[2] == pytest.approx(0.002)
    assert np.isfinite(run.end_s[[0, 1, 3]]).all() and np.isnan(run.end_s[2])
    assert not run.left_by_errors.any()


def test_the_plan_answers_every_request_once_by_the_tier_that_took_it_on_its_first_send_clock():
    demand = _demand(np.arange(40) * 0.002)   # 40 requests in 80 ms on a replica that holds 4
    plan = plan_fallback(demand, FleetConfig(replica=PRIMARY, fallback=FallbackRule(4)),
                         FleetConfig(replica=SMALL), SLO_TTFT, window_s=1.0)
    assert plan.tier.sum() == 36 - plan.by_errors and plan.by_errors == 0
    assert plan.both.requests == 40 and plan.both.unfinished == 0
    merged = plan.merged
    assert np.array_equal(merged.send_s, demand.t_s)
    assert (merged.replica[~plan.tier] == 0).all() and (merged.replica[plan.tier] == 1).all()   # renumbered after
    assert len(merged.lives) == 2
    # the fallback's requests start on their first send: the small pool's step is 2 ms, so each is quick
    fast = plan.tier_outcome("fallback", SLO_TTFT, 1.0)
    assert fast.requests == int(plan.tier.sum()) and fast.p99["ttft_s"] < 0.2


def test_an_error_the_router_gives_up_on_is_passed_on_after_its_retries_and_is_no_ones_error():
    # two attempts, the retry 50 ms after the first: the first request's retry (at 50 ms) still meets the burst
    # and leaves then; the second's (at 60 ms) is past it and answered by the primary
    policy = RouterResilience(retry_max_retries=2, retry_jitter_factor=0.0, disable_circuit_breaker=True)
    burst = (ReplicaErrors(replica=0, start_s=0.0, end_s=0.055, status=503, rate=1.0),)
    demand = _demand([0.0, 0.01, 0.2])
    primary = FleetConfig(replica=PRIMARY, fallback=FallbackRule(None, True), resilience=policy, replica_errors=burst)
    run = run_fleet(demand, primary)
    assert run.left_s[0] == pytest.approx(0.05) and np.isnan(run.left_s[1:]).all()
    assert run.left_by_errors.tolist() == [True, False, False] and not run.errored.any()
    assert run.router["attempts"] == 5 and run.router["errored"] == 0
    plan = plan_fallback(demand, primary, FleetConfig(replica=SMALL), SLO_TTFT, window_s=1.0)
    assert plan.both.failed == 0 and plan.both.unfinished == 0
    assert plan.tier.tolist() == [True, False, False] and plan.by_errors == 1
    # its client waited through both attempts: its first token is after it left, on the fallback
    assert plan.merged.first_token_s[0] > 0.05 and plan.merged.ttft_s[0] > 0.05


def test_without_errors_in_the_rule_an_error_stays_the_clients():
    policy = RouterResilience(retry_max_retries=1, disable_circuit_breaker=True)
    burst = (ReplicaErrors(replica=0, start_s=0.0, end_s=1.0, status=500, rate=1.0),)
    run = run_fleet(_demand([0.0, 0.1]), FleetConfig(replica=PRIMARY, fallback=FallbackRule(8), resilience=policy,
                                                     replica_errors=burst))
    assert run.errored.all() and np.isnan(run.left_s).all()


def test_the_fallbacks_demand_is_what_left_in_the_order_it_left_at_the_moment_it_left():
    demand = _demand([0.0, 0.1, 0.2, 0.3])
    part, idx = fallback_demand(demand, np.array([np.nan, 0.35, np.nan, 0.3]))
    assert idx.tolist() == [3, 1] and part.t_s.tolist() == [0.3, 0.35]


def test_a_fallback_with_hedging_or_pd_pools_is_refused():
    with pytest.raises(ValueError, match="--fallback with --hedge-after"):
        FleetConfig(replica=PRIMARY, fallback=FallbackRule(2), hedge_after="0.5")
