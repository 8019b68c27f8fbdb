"""Hedged requests in the plan's fleet on small hand-checked cases: a copy goes out at its delay only when
nothing has shown, the first to show is kept and the other aborted on its replica, a race survives a
replica's loss, and every request is answered once; and a measured front end, which puts the client's
clock (and a race's first token) where the load generator reads it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from calculators.plan.demand import Demand
from calculators.plan.fleet import Fault, FleetConfig, ReplicaSpec, run_fleet
from calculators.plan.resilience import ReplicaErrors
from calculators.sim.front_end import FrontEnd, FrontEndByLoad
from calculators.sim.step_model import StepTimeModel
from calculators.sim.workload import SimServer

# one request at a time per replica (no batching), every step 10 ms: who waits behind whom is exact
SPEC = ReplicaSpec(SimServer.from_flags("none", num_kv_blocks=4000), StepTimeModel(base_s=0.01), 4000, gpus=1,
                   describe="one at a time")


def _demand(times, outputs, prompt=16) -> Demand:
    n = len(times)
    return Demand(t_s=np.asarray(times, dtype=float), prompt=np.full(n, prompt, dtype=np.int64),
                  output=np.asarray(outputs, dtype=np.int64), session=np.full(n, -1, dtype=np.int64), prefix=None)


def _run(outputs, hedge="0.3", faults=()):
    # A (200 tokens) on replica 0, B on replica 1, C behind A on replica 0; round robin
    return run_fleet(_demand([0.0, 0.001, 0.002], outputs),
                     FleetConfig(SPEC, "round_robin", initial_replicas=2, hedge_after=hedge, faults=faults))


def test_a_copy_on_an_idle_replica_shows_first_and_the_primary_is_aborted():
    run = _run([200, 10, 10])
    # A showed at 10 ms (no copy); C had shown nothing at 0.302 s: its copy went to replica 1 (idle since
    # 0.101 s), showed at 0.312 and answered at 0.402; its primary left replica 0's queue (else C would be
    # answered there after A, at 2.1 s)
    assert run.hedged.tolist() == [False, False, True] and run.copy_kept.tolist() == [False, False, True]
    np.testing.assert_allclose(run.ttft_s, [0.01, 0.01, 0.31])
    np.testing.assert_allclose(run.e2e_s, [2.0, 0.1, 0.4])
    assert run.replica.tolist() == [0, 1, 1] and [life.served for life in run.lives] == [1, 2]
    assert run.hedging == {"after": "0.3s", "requests": 3, "hedged": 1, "hedged_share": pytest.approx(1 / 3),
                           "copies_kept": 1, "copies_kept_share": 1.0, "extra_requests": pytest.approx(1 / 3)}


def test_when_the_primary_shows_first_the_copy_is_aborted_on_its_replica():
    run = _run([200, 300, 10])
    # C's copy waits behind B (to 3.001 s) on replica 1; C's primary starts after A, at 2.0 s, and wins;
    # had the copy run on, C would be answered by replica 1 at 3.101 s
    assert run.hedged.tolist() == [False, False, True] and not run.copy_kept.any()
    np.testing.assert_allclose(run.ttft_s, [0.01, 0.01, 2.008])
    np.testing.assert_allclose(run.e2e_s, [2.0, 3.0, 2.098])
    assert run.replica.tolist() == [0, 1, 0] and [life.served for life in run.lives] == [2, 1]


def test_a_running_percentile_hedges_nothing_until_it_knows_enough_answers():
    run = _run([200, 10, 10], hedge="p50")
    assert not run.hedged.any() and run.hedging["hedged"] == 0 and run.hedging["copies_kept_share"] is None
    np.testing.assert_allclose(run.e2e_s, [2.0, 0.1, 2.098])   # C waits for A, as without hedging


def test_a_race_goes_on_with_the_other_copy_when_a_replica_is_lost():
    copy_lost = _run([200, 10, 10], faults=(Fault(0.305, replica=1),))
    # the copy dies with replica 1 before it shows: C is answered by its primary after A, nothing lost
    assert not copy_lost.lost.any() and copy_lost.hedged[2] and not copy_lost.copy_kept[2]
    np.testing.assert_allclose(copy_lost.e2e_s, [2.0, 0.1, 2.098])
    primary_lost = _run([200, 10, 10], faults=(Fault(0.305, replica=0),))
    # replica 0 dies holding A and C's primary: A is lost, C is the copy's answer
    assert primary_lost.lost.tolist() == [True, False, False] and primary_lost.copy_kept[2]
    np.testing.assert_allclose(primary_lost.e2e_s[1:], [0.1, 0.4])


def test_under_load_every_request_is_answered_once_by_one_of_its_copies():
    rng = np.random.default_rng(3)
    times = np.sort(rng.uniform(0, 20, 300))
    # a KV cache of 200 blocks of 16 tokens: prompts of 400 queue for it, so some copies find room first
    continuous = ReplicaSpec(SimServer.from_flags("continuous", num_kv_blocks=200), StepTimeModel(
        base_s=0.01, per_prefill_token_s=2e-5), 200, gpus=1, describe="continuous")
    config = FleetConfig(continuous, "least_load", initial_replicas=3, hedge_after="0.05")
    run = run_fleet(_demand(times, rng.integers(5, 200, 300), prompt=400), config)
    assert np.isfinite(run.end_s).all() and not run.lost.any()
    assert sum(life.served for life in run.lives) == 300
    assert 0 < run.hedging["hedged"] < 300 and 0 < run.hedging["copies_kept"] < run.hedging["hedged"]
    assert (run.ttft_s > 0).all() and (run.end_s >= run.first_token_s).all()


def test_a_hedge_the_plan_cannot_race_is_refused_naming_the_flag():
    with pytest.raises(ValueError, match="--hedge-after must not be negative"):
        FleetConfig(SPEC, hedge_after="-1")
    with pytest.raises(ValueError, match="--hedge-after with --replica-fault"):
        FleetConfig(SPEC, hedge_after="0.3", replica_errors=(ReplicaErrors(0, 0.0, 1.0, 503, 1.0),))


# -- a measured front end: the client's clock ------------------------------------------------------
FRONT = FrontEndByLoad((1.0,), (FrontEnd(in_s=(0.005,), first_out_s=(0.002,), last_out_s=(0.003,)),))


def test_a_front_end_delays_the_engines_arrival_and_the_clients_tokens():
    spec = replace(SPEC, front_end=FRONT)
    run = run_fleet(_demand([0.0, 1.0], [10, 10]), FleetConfig(spec, "round_robin", initial_replicas=1))
    # in 5 ms, one 10-ms step to the first token, 2 ms back; nine more steps, 3 ms back
    np.testing.assert_allclose(run.ttft_s, [0.017, 0.017])
    np.testing.assert_allclose(run.e2e_s, [0.108, 0.108])


def test_a_hedge_races_on_the_clients_clock_through_the_front_end():
    spec = replace(SPEC, front_end=FRONT)
    run = run_fleet(_demand([0.0, 0.001, 0.002], [200, 10, 10]),
                    FleetConfig(spec, "round_robin", initial_replicas=2, hedge_after="0.3"))
    # C's copy leaves at 0.302 s, reaches replica 1 at 0.307, its first token is made at 0.317 and seen at 0.319
    assert run.hedged.tolist() == [False, False, True] and run.copy_kept.tolist() == [False, False, True]
    np.testing.assert_allclose(run.ttft_s, [0.017, 0.017, 0.317])
    np.testing.assert_allclose(run.e2e_s[2], 0.302 + 0.005 + 0.1 + 0.003 - 0.002)


def test_a_request_still_in_the_front_end_is_lost_with_its_replica():
    spec = replace(SPEC, front_end=FRONT)
    run = run_fleet(_demand([0.0, 0.5], [10, 10]), FleetConfig(spec, "round_robin", initial_replicas=2,
                                                               cold_start_s=1.0, faults=(Fault(0.003, replica=0),)))
    assert run.lost.tolist() == [True, False] and np.isfinite(run.end_s[1]) and run.replica[1] == 1
