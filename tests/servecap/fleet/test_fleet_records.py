"""The measured run in the plan's terms (`records_as_run`), and a demand as the trace Locust replays."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calculators.plan.demand import from_rows
from calculators.plan.fleet_run import ReplicaLife
from loadgen.workload.traces import load_trace
from servecap.fleet.demand_file import write_demand
from servecap.fleet.replay_records import records_as_run

T0 = 1_000_000.0


def _record(t_sched, t_start, status="ok", ttft=0.1, e2e=1.0, replica="r0", out=10):
    return {"t_sched": T0 + t_sched, "t_start": T0 + t_start, "status": status, "ttft_s": ttft, "e2e_s": e2e,
            "replica": replica, "output_tokens": out}


def test_records_on_the_fleets_clock_in_send_order():
    records = [_record(2.0, 2.01, replica="r1"), _record(1.0, 1.02), _record(3.0, 3.0, status="error", ttft=None,
                                                                             e2e=0.5, replica=None, out=None)]
    lives = [ReplicaLife(0, 0.0, 0.0), ReplicaLife(1, 0.0, 1.5)]
    run = records_as_run(records, T0, lives, [(1.5, 2, 1)], 3.0, {"r0": 0, "r1": 1})
    assert run.send_s.tolist() == [1.0, 2.0, 3.0]
    assert np.allclose(run.first_token_s[:2], [1.12, 2.11]) and math.isnan(run.first_token_s[2])
    assert np.allclose(run.end_s[:2], [2.02, 3.01]) and math.isnan(run.end_s[2])   # a failure never finished
    assert run.replica.tolist() == [0, 1, -1] and run.output.tolist() == [10, 10, 0]
    assert run.horizon_s == pytest.approx(3.01) and run.decisions == [(1.5, 2, 1)]
    # a hedge's losing copy (--hedge-after) is neither a request of its own nor a loss
    hedged = [*records, {**_record(1.0, 1.12, status="cancelled", ttft=None, e2e=0.01), "hedge": "copy"}]
    again = records_as_run(hedged, T0, lives, [(1.5, 2, 1)], 3.0, {"r0": 0, "r1": 1})
    assert again.send_s.tolist() == [1.0, 2.0, 3.0] and again.lost.tolist() == [False, False, True]
    assert again.hedging is None   # no rule given: not a hedged run


def test_a_hedged_runs_kept_records_say_which_copy_answered():
    records = [{**_record(1.0, 1.0), "hedge": "primary"},
               {**_record(1.0, 1.3, status="cancelled", ttft=None, e2e=0.01), "hedge": "copy"},
               {**_record(2.0, 2.0, status="cancelled", ttft=None, e2e=0.3), "hedge": "primary"},
               {**_record(2.0, 2.3, replica="r1"), "hedge": "copy"},
               _record(3.0, 3.0)]
    run = records_as_run(records, T0, [ReplicaLife(0, 0.0, 0.0), ReplicaLife(1, 0.0, 0.0)], [], 4.0,
                         {"r0": 0, "r1": 1}, hedge_rule="0.3s")
    assert run.hedged.tolist() == [True, True, False] and run.copy_kept.tolist() == [False, True, False]
    assert run.replica.tolist() == [0, 1, 0]
    assert run.hedging == {"after": "0.3s", "requests": 3, "hedged": 2, "hedged_share": pytest.approx(2 / 3),
                           "copies_kept": 1, "copies_kept_share": 0.5, "extra_requests": pytest.approx(2 / 3)}


def test_a_demand_is_written_as_the_trace_that_replays_it(tmp_path):
    demand = from_rows([0.5, 1.25, 3.0], [600, 700, 100], [10, 20, 30], [(1, 2), (1, 2), ()], speedup=1.0)
    trace = load_trace(write_demand(demand, tmp_path / "demand.jsonl"))
    assert trace.format == "mooncake" and trace.offsets() == [0.0, 0.75, 2.5]
    assert [(r.input_tokens, r.output_tokens, r.hash_ids) for r in trace.rows] == \
        [(600, 10, (1, 2)), (700, 20, (1, 2)), (100, 30, ())]


def test_a_demand_of_sessions_is_written_as_sessions_the_replay_chains(tmp_path):
    demand = from_rows([0.0, 0.0, 1.0, 5.0], [100, 200, 50, 300], [5, 5, 5, 5], session=["a", "a", "", "a"],
                       delay_s=[None, 0.5, None, 0.25])
    trace = load_trace(write_demand(demand, tmp_path / "demand.jsonl"))
    assert trace.chained and [len(rows) for rows in trace.sessions] == [3, 1]
    turns = [trace.rows[k] for k in trace.sessions[0]]
    # each later turn: its delay after the answer, and no sooner than its own time (the third's 5 s)
    assert [(r.input_tokens, r.delay_s, r.offset_s) for r in turns] == [(100, None, 0.0), (200, 0.5, 0.0),
                                                                        (300, 0.25, 5.0)]
    assert trace.rows[trace.sessions[1][0]].session == "" and trace.rows[trace.sessions[1][0]].offset_s == 1.0


def test_a_fan_out_is_written_as_parallel_rows_that_read_back_as_the_same_joins(tmp_path):
    from calculators.plan.demand_sessions import agent_session_demand
    from contract.agent_session import parse_session
    from contract.distributions import LengthDistribution

    starts = from_rows([0.0, 0.4], [1, 1], [1, 1], duration_s=10.0)
    spec = parse_session("turns:2,tools:1-2,fanout:2-3,tool-result:uniform:8:32,schemas:1")
    demand = agent_session_demand(starts, spec, seed=5, block_tokens=16, prompt=LengthDistribution.fixed(20),
                                  output=LengthDistribution.fixed(7))
    assert demand.joins
    trace = load_trace(write_demand(demand, tmp_path / "demand.jsonl"))
    groups = [row.parallel for row in trace.rows]
    assert sum(g is not None for g in groups) == sum(len(v) for k, v in demand.followers().items()
                                                     if len([c for c in v if demand.after[c] == k]) > 1)
    parents, joins = trace.links()
    again = from_rows(trace.offsets(), [r.input_tokens for r in trace.rows], [r.output_tokens for r in trace.rows],
                      session=[r.key for r in trace.rows], delay_s=[r.delay_s for r in trace.rows],
                      parents=parents, joins=joins)
    assert again.after.tolist() == demand.after.tolist() and sorted(again.joins) == sorted(demand.joins)
    assert again.prompt.tolist() == demand.prompt.tolist()


def test_a_demand_of_users_keeps_each_users_key_for_the_router_and_chains_nothing(tmp_path):
    demand = from_rows([0.0, 0.5, 1.0, 1.5], [100, 200, 50, 300], [5, 5, 5, 5], session=["u1", "u2", "", "u1"])
    trace = load_trace(write_demand(demand, tmp_path / "demand.jsonl"))
    assert not trace.chained and trace.sessions == ()   # each request at its own time, waiting on nothing
    keys = [r.key for r in trace.rows]
    assert keys[2] == "" and keys[0] == keys[3] != keys[1] and all(r.session == "" for r in trace.rows)
    # read back as a plan's demand, the same users: the router's keys of the plan and of the replay agree
    again = from_rows(trace.offsets(), [r.input_tokens for r in trace.rows], [r.output_tokens for r in trace.rows],
                      session=keys)
    assert again.session.tolist() == demand.session.tolist()


def test_every_request_of_the_demand_is_counted_once_by_its_status():
    from servecap.fleet.replay_records import request_accounting

    records = [{"status": "ok"}] * 5 + [{"status": "error"}] * 2 + [{"status": "cancelled"}] * 3
    assert request_accounting(records, 7) == {"sent": 7, "by_status": {"error": 2, "ok": 5}, "cancelled_copies": 3,
                                              "missing": 0}
    assert request_accounting(records[:6], 7)["missing"] == 1   # a request the replay lost is said, not hidden


def test_a_shadows_copies_are_its_engines_records_on_the_fleets_clock_after_the_replay_began():
    from servecap.fleet.shadow import engine_run

    def row(arrival, first, finish, out=8):
        return {"t_arrival": T0 + arrival, "t_first_token": T0 + first, "t_finish": T0 + finish, "output_tokens": out}

    rows = {3: [row(-40.0, -39.9, -39.0), row(1.0, 1.2, 2.0)], 4: [row(0.5, 0.6, 1.5, out=4)]}   # -40 s: its warm-up
    run = engine_run(rows, T0, [], 3.0)
    assert run.send_s.tolist() == [0.5, 1.0] and run.replica.tolist() == [4, 3] and run.output.tolist() == [4, 8]
    assert np.allclose(run.ttft_s, [0.1, 0.2]) and np.allclose(run.e2e_s, [1.0, 1.0]) and not run.lost.any()
