"""Chained sessions in the plan's fleet loop: a later turn goes when the turn before it ends (answered or
failed) and its delay is up, or at its own time if later; the replicas holding such a turn are stepped so
that no step runs past a turn that would have joined it."""

from __future__ import annotations

import numpy as np
import pytest

from calculators.plan.demand import Demand, from_rows
from calculators.plan.fleet import Fault, FleetConfig, ReplicaSpec, run_fleet
from calculators.sim.step_model import StepTimeModel
from calculators.sim.workload import SimServer

STEP = StepTimeModel(base_s=0.01)   # every step 10 ms, whatever its batch
SPEC = ReplicaSpec(SimServer.from_flags("continuous", num_kv_blocks=4000), STEP, 4000, gpus=1,
                   hourly_usd_per_gpu=1.0, describe="test replica")


def _rows(offsets, sessions, delays, output=10):
    n = len(offsets)
    return from_rows(offsets, [16] * n, [output] * n, session=sessions, delay_s=delays)


def test_a_later_turn_goes_its_delay_after_the_answer():
    # session a: turns at 0, then 0.5 s after each answer; b: one request at 0.05 s
    demand = _rows([0.0, 0.0, 0.0, 0.05], ["a", "a", "a", "b"], [None, 0.5, 0.5, None])
    assert demand.after.tolist() == [-1, 0, 1, -1]   # by nominal time: a chained turn at its previous turn's
    run = run_fleet(demand, FleetConfig(SPEC, "round_robin", initial_replicas=1))
    order = np.argsort(run.send_s)
    turns = [i for i in order if demand.session[i] == demand.session[0]]
    ends = run.end_s[turns]
    # each turn alone on the replica: 10 steps of 10 ms; the next is sent 0.5 s after the answer
    np.testing.assert_allclose(run.e2e_s[turns], 0.10)
    np.testing.assert_allclose(run.send_s[turns[1:]], ends[:-1] + 0.5)
    assert np.isfinite(run.end_s).all()


def test_a_turn_with_its_own_later_time_waits_for_it():
    demand = _rows([0.0, 2.0], ["a", "a"], [None, 0.0])
    run = run_fleet(demand, FleetConfig(SPEC, "round_robin", initial_replicas=1))
    assert run.send_s.tolist() == [0.0, 2.0]   # answered at 0.1 s; its own time is later


def test_a_turn_joins_the_step_after_its_send_not_a_step_already_run():
    # a long request holds the replica's steps; the session's second turn is sent 15 ms after its first
    # ends (mid-step): it is prefilled in the step that starts next, not one the replica ran without it
    demand = from_rows([0.0, 0.0, 0.0], [16, 16, 16], [200, 5, 5], session=["long", "a", "a"],
                       delay_s=[None, None, 0.015])
    run = run_fleet(demand, FleetConfig(SPEC, "round_robin", initial_replicas=1))
    first, second = 1, 2
    assert run.send_s[second] == pytest.approx(run.end_s[first] + 0.015)
    # steps every 10 ms from 0: the first step at or after the send starts at the next multiple of 10 ms
    step_start = np.ceil(run.send_s[second] / 0.01 - 1e-9) * 0.01
    assert run.first_token_s[second] == pytest.approx(step_start + 0.01)


def test_a_failed_turn_lets_the_next_one_go_at_the_failure():
    # replica 0 dies at 0.05 s holding the first turn; the replay's client sees the error then
    demand = _rows([0.0, 0.0], ["a", "a"], [None, 0.2], output=50)
    config = FleetConfig(SPEC, "round_robin", initial_replicas=2, cold_start_s=1.0, faults=(Fault(0.05, 0),))
    run = run_fleet(demand, config)
    assert run.lost.tolist() == [True, False]
    assert run.send_s[1] == pytest.approx(0.25) and run.replica[1] == 1 and np.isfinite(run.end_s[1])


def test_chained_rows_need_an_earlier_turn_and_a_demand_of_them_is_not_split():
    with pytest.raises(ValueError, match="row 1 waits on its session's previous turn, and has none"):
        _rows([0.0], ["a"], [0.1])
    demand = _rows([0.0, 0.0], ["a", "a"], [None, 0.1])
    with pytest.raises(ValueError, match="chained sessions cannot be split"):
        demand.select(np.array([1]))
    with pytest.raises(ValueError, match="waits on an earlier one"):
        Demand(np.zeros(2), np.ones(2, dtype=np.int64), np.ones(2, dtype=np.int64), np.zeros(2, dtype=np.int64),
               None, after=np.array([1, -1]), delay_s=np.zeros(2))
