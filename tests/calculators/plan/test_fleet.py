"""The fleet's loop on small hand-checked cases: routing, faults and retries, scale-from-zero, the
autoscaler's replicas over time, billing, and the SLO windows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calculators.plan.autoscaler import AutoscalerConfig
from calculators.plan.demand import Demand
from calculators.plan.fleet import Fault, FleetConfig, ReplicaSpec, run_fleet
from calculators.plan.outcome import PlanSlo, outcome
from calculators.plan.planner import cheapest_static
from calculators.sim.step_model import StepTimeModel
from calculators.sim.workload import SimServer
from contract.slo import SLO

STEP = StepTimeModel(base_s=0.01)   # every step 10 ms, whatever its batch
SPEC = ReplicaSpec(SimServer.from_flags("continuous", num_kv_blocks=4000), STEP, 4000, gpus=2,
                   hourly_usd_per_gpu=3.0, describe="test replica")


def _demand(times, prompt=16, output=10, prefix=None, session=None) -> Demand:
    n = len(times)
    return Demand(t_s=np.asarray(times, dtype=float), prompt=np.full(n, prompt, dtype=np.int64),
                  output=np.full(n, output, dtype=np.int64),
                  session=np.full(n, -1, dtype=np.int64) if session is None else np.asarray(session, dtype=np.int64),
                  prefix=prefix)


def test_round_robin_alternates_and_each_request_takes_its_steps():
    run = run_fleet(_demand([0.0, 1.0, 2.0, 3.0]), FleetConfig(SPEC, "round_robin", initial_replicas=2))
    assert run.replica.tolist() == [0, 1, 0, 1]
    # alone on its replica: one prefill step (first token), then 9 decode steps of 10 ms
    np.testing.assert_allclose(run.ttft_s, 0.01)
    np.testing.assert_allclose(run.e2e_s, 0.10)
    np.testing.assert_allclose(run.tpot_s, 0.01)
    assert not run.retried.any()


def test_a_request_past_the_replicas_context_is_answered_400_at_once_and_its_session_goes_on():
    from dataclasses import replace

    from calculators.plan.demand import from_rows

    # a session of three turns whose second asks 90 + 20 tokens of a 100-token context; a lone request fits
    demand = from_rows([0.0, 0.0, 0.0, 0.5], [50, 90, 60, 80], [10, 20, 10, 20], session=["s", "s", "s", ""],
                       delay_s=[None, 0.2, 0.2, None])
    run = run_fleet(demand, FleetConfig(replace(SPEC, max_model_len=100), "round_robin", initial_replicas=1))
    assert run.errored.tolist() == [False, True, False, False] and run.router["errored"] == 1
    assert math.isnan(run.end_s[1]) and run.router["retries"] == 0   # a client's error: never tried again
    first_end = run.end_s[0]
    # the refused turn is the client's error at once (its send), so the third goes 0.2 s after it
    assert run.send_s[1] == pytest.approx(first_end + 0.2) and run.send_s[2] == pytest.approx(run.send_s[1] + 0.2)
    assert np.isfinite(run.end_s[[0, 2, 3]]).all()
    assert not run_fleet(demand, FleetConfig(SPEC, "round_robin", initial_replicas=1)).errored.any()   # no limit


def test_a_killed_replicas_requests_fail_and_its_replacement_starts():
    # ten long requests at t=0 on replica 0 and 1 alternately; replica "the busiest" dies at 0.5 s
    config = FleetConfig(SPEC, "round_robin", initial_replicas=2, cold_start_s=5.0, faults=(Fault(0.5),))
    run = run_fleet(_demand([0.0] * 10, output=200), config)
    assert run.lives[0].killed and run.lost.tolist() == [True, False] * 5 and not run.retried.any()
    assert np.isnan(run.end_s[run.lost]).all() and np.isnan(run.ttft_s[run.lost]).all()
    assert np.isfinite(run.end_s[~run.lost]).all() and (run.replica[~run.lost] == 1).all()
    assert run.lives[2].requested_s == 0.5 and run.lives[2].ready_s == 5.5


def test_with_retry_lost_a_killed_replicas_requests_are_sent_again_to_another():
    config = FleetConfig(SPEC, "round_robin", initial_replicas=2, cold_start_s=5.0, faults=(Fault(0.5),),
                         retry_lost=True)
    run = run_fleet(_demand([0.0] * 10, output=200), config)
    assert run.lives[0].killed and not run.lives[1].killed          # a tie in load: the lower id goes
    assert run.retried.sum() == 5 and (run.replica[run.retried] == 1).all() and not run.lost.any()
    assert np.isfinite(run.end_s).all()
    # the lost five started over at 0.5 s, keeping their first send: their TTFT counts the loss
    assert (run.ttft_s[run.retried] > 0.5).all() and (run.ttft_s[~run.retried] < 0.1).all()
    replacement = run.lives[2]
    assert replacement.requested_s == 0.5 and replacement.ready_s == 5.5 and not replacement.killed


def test_requests_wait_at_the_router_while_no_replica_is_ready():
    autoscaler = AutoscalerConfig(min_replicas=0, max_replicas=2, metric="in_flight", target=4.0, interval_s=1.0,
                                  down_window_s=0.0)
    config = FleetConfig(SPEC, "round_robin", initial_replicas=0, cold_start_s=3.0, autoscaler=autoscaler)
    run = run_fleet(_demand([0.2, 0.4, 5.0]), config)
    first = run.lives[0]
    assert first.requested_s == 1.0 and first.ready_s == 4.0          # the first decision after the demand came
    assert run.ttft_s[0] == pytest.approx(4.0 - 0.2 + 0.01)           # waited for the cold start
    assert np.isfinite(run.end_s).all()


def test_the_autoscaler_adds_replicas_under_load_and_removes_them_after():
    autoscaler = AutoscalerConfig(min_replicas=1, max_replicas=6, metric="in_flight", target=8.0, interval_s=2.0,
                                  down_window_s=10.0)
    config = FleetConfig(SPEC, "round_robin", initial_replicas=1, cold_start_s=4.0, autoscaler=autoscaler)
    busy = np.linspace(0.0, 30.0, 1500)                    # 50 req/s of 3-second requests: ~150 in flight
    quiet = np.linspace(31.0, 90.0, 30)
    run = run_fleet(_demand(np.concatenate([busy, quiet]), output=300), config)
    wanted = {d.t_s: d.wanted for d in run.decisions}
    assert max(wanted.values()) == 6                         # clamped at max
    assert wanted[2.0] > 1                                   # up at the first decision under load
    first = run.decisions[0]                                 # what it read: replica 0's requests in flight
    assert first.ready == 1 and len(first.readings) == 1
    assert first.wanted == min(math.ceil(first.readings[0] / 8.0), 5)
    # the four asked for at t=2 are ready at 6, just after that tick (a real controller asks after it reads)
    assert [(d.t_s, d.ready) for d in run.decisions[:4]] == [(2.0, 1), (4.0, 1), (6.0, 1), (8.0, 5)]
    assert wanted[max(wanted)] == 1                          # and back to min when it is quiet
    # HPA's default rate limit: up by 4 replicas (or 100%) per 15 s, so 1 -> 5 at t=2, then 6
    ready = run.ready_over_time(np.array([1.0, 7.0, 28.0, 85.0]))
    assert ready.tolist() == [1, 5, 6, 1]
    assert np.isfinite(run.end_s).all()


def test_billing_counts_cold_starts_and_the_slo_windows_count_lost_requests_as_failing():
    config = FleetConfig(SPEC, "round_robin", initial_replicas=1)
    run = run_fleet(_demand([0.0, 10.0, 20.0]), config)
    assert run.replica_seconds() == pytest.approx(20.1)
    slo = PlanSlo(SLO(ttft_ms=50), attainment=0.5)
    result = outcome(run, slo, gpus_per_replica=2, hourly_usd_per_gpu=3.0, window_s=10.0)
    assert [w.requests for w in result.windows] == [1, 1, 1] and result.attainment == 1.0
    assert result.gpu_hours == pytest.approx(2 * 20.1 / 3600)
    assert result.usd == pytest.approx(3.0 * 2 * 20.1 / 3600)
    run.end_s[1] = np.nan                                   # a request that never finished
    run.first_token_s[1] = np.nan
    lost = outcome(run, slo, window_s=10.0)
    assert lost.windows[1].met is False and math.isinf(lost.windows[1].p99["ttft_s"])
    assert lost.windows[1].why_not == "ttft_s p99 unbounded > 50.0 ms: 1 of 1 requests never finished"
    assert lost.attainment == pytest.approx(2 / 3) and lost.unfinished == 1
    run.lost = np.array([False, False, True])               # failed with its replica: an error, not a latency
    run.end_s[2] = run.first_token_s[2] = np.nan
    failed = outcome(run, slo, window_s=10.0)
    assert failed.windows[2].met is False and failed.windows[2].why_not == "error rate 100.0% > 1%"
    assert (failed.unfinished, failed.failed, failed.windows[2].failed, failed.windows[2].unfinished) == (1, 1, 1, 0)
    assert failed.to_dict()["windows"][2]["failed"] == 1 and failed.attainment == pytest.approx(1 / 3)


def test_the_static_search_finds_the_fewest_replicas_or_says_none_meets_it():
    # 40 requests at once, each 100 ms alone; batching on one replica makes the queue the tail
    demand = _demand(np.zeros(40), output=10)
    slow = ReplicaSpec(SimServer.from_flags("continuous", num_kv_blocks=4000, max_num_seqs=4), STEP, 4000)
    config = FleetConfig(slow, "round_robin", initial_replicas=1)
    found = cheapest_static(demand, config, PlanSlo(SLO(e2e_ms=350), attainment=1.0), window_s=60.0, max_replicas=16)
    # 4 sequences at a time: with n replicas each holds 40/n, served in waves of 4 of ~110 ms
    assert found.config.initial_replicas == 4
    assert cheapest_static(demand, config, PlanSlo(SLO(e2e_ms=1)), window_s=60.0, max_replicas=8) is None


def test_shared_prefixes_reach_the_prefix_cache_through_the_fleet():
    prefix = tuple((1, 2, 3) for _ in range(6))
    demand = _demand([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], prompt=64, prefix=prefix)
    demand = Demand(t_s=demand.t_s, prompt=demand.prompt, output=demand.output, session=demand.session,
                    prefix=prefix, prefix_block_tokens=16)
    one = run_fleet(demand, FleetConfig(SPEC, "round_robin", initial_replicas=1))
    assert np.isfinite(one.end_s).all()
    # 48 shared tokens (3 blocks of 16) of 64: the first request misses, the other five hit
    assert one.prefix_hit_rate() == pytest.approx(5 * 48 / (6 * 64))
    spread = run_fleet(demand, FleetConfig(SPEC, "round_robin", initial_replicas=3))
    assert spread.prefix_hit_rate() == pytest.approx(3 * 48 / (6 * 64))   # each replica misses once
