"""Agent sessions as a plan's demand: each start a chain of requests whose prompts carry the whole history; a
turn that fans out runs its sub-agents at once after its call and joins them before its next request."""

from __future__ import annotations

import numpy as np
import pytest

from calculators.plan.demand import from_rows
from calculators.plan.demand_sessions import SHARED_PREFIX_IDS, agent_session_demand
from contract.agent_session import parse_session
from contract.distributions import LengthDistribution

FIXED = dict(prompt=LengthDistribution.fixed(20), output=LengthDistribution.fixed(7))


def _starts(*times):
    return from_rows(list(times), [1] * len(times), [1] * len(times), duration_s=60.0)


def test_a_session_is_its_turns_tool_rounds_and_answers_each_after_the_one_before():
    spec = parse_session("turns:2,tools:1,tool-latency:0.5,tool-result:10,schemas:1,call-tokens:5")
    demand = agent_session_demand(_starts(3.0), spec, seed=1, think_time_s=2.0, block_tokens=16, **FIXED)
    shared = -(-spec.prefix_tokens // 16) * 16
    # history: 20 (user) -> +5 call +10 result -> +7 answer +20 user -> +5 call +10 result
    assert (demand.prompt - shared).tolist() == [20, 35, 62, 77]
    assert demand.output.tolist() == [5, 7, 5, 7]
    assert demand.after.tolist() == [-1, 0, 1, 2] and demand.delay_s.tolist() == [0.0, 0.5, 2.0, 0.5]
    assert demand.t_s.tolist() == [3.0] * 4 and demand.chained and demand.duration_s == 60.0
    assert demand.followers() == {0: [1], 1: [2], 2: [3]} and demand.waits() == {1: 1, 2: 1, 3: 1}
    prefixes = demand.prefix
    assert all(p[: shared // 16] == tuple(range(SHARED_PREFIX_IDS, SHARED_PREFIX_IDS + shared // 16)) for p in prefixes)
    for before, after in zip(prefixes, prefixes[1:]):   # each request's blocks begin with the last one's
        assert after[: len(before)] == before
    assert [len(p) - shared // 16 for p in prefixes] == [2, 3, 4, 5]   # ceil(history / 16)


def test_sessions_share_the_system_prompt_and_nothing_else_and_keep_their_draws():
    spec = parse_session("turns:3,tools:0-2,tool-latency:lognormal:1:0.5,tool-result:uniform:8:64,schemas:2")
    lengths = dict(prompt=LengthDistribution.uniform(10, 90), output=LengthDistribution.uniform(5, 50))
    two = agent_session_demand(_starts(0.0, 1.0), spec, seed=4, **lengths)
    three = agent_session_demand(_starts(0.0, 1.0, 2.0), spec, seed=4, **lengths)
    own = {key: set() for key in (0, 1)}
    for key, prefix in zip(two.session.tolist(), two.prefix):
        own[key] |= {block for block in prefix if block < SHARED_PREFIX_IDS}
    assert own[0] and own[1] and not own[0] & own[1]
    assert set(two.session.tolist()) == {0, 1} and int((two.after < 0).sum()) == 2   # one opening request each
    # a third session leaves the first two as they were (each is seeded by its own number)
    first_two = three.session < 2
    assert three.prompt[first_two].tolist() == two.prompt.tolist()
    assert three.output[first_two].tolist() == two.output.tolist()


def test_a_fan_out_sends_its_sub_agents_at_the_call_and_joins_them_before_the_next_request():
    spec = parse_session("turns:1,tools:1,fanout:3,tool-result:10,schemas:1,call-tokens:5")
    demand = agent_session_demand(_starts(2.0), spec, seed=0, block_tokens=16, **FIXED)
    shared = -(-spec.prefix_tokens // 16) * 16
    # the call (row 0), three sub-agents (rows 1-3, each a task of 20 and an answer of 10), then the answer
    # (row 4), whose new content is the three joined answers: 20 + 5 + 30
    assert (demand.prompt - shared).tolist() == [20, 20, 20, 20, 55]
    assert demand.output.tolist() == [5, 10, 10, 10, 7]
    assert demand.after.tolist() == [-1, 0, 0, 0, 3] and demand.delay_s.tolist() == [0.0] * 5
    assert demand.joins == ((4, 1), (4, 2))
    assert demand.followers() == {0: [1, 2, 3], 1: [4], 2: [4], 3: [4]} and demand.waits()[4] == 3
    own = [set(p) - set(demand.prefix[0][: shared // 16]) for p in demand.prefix]
    assert not own[1] & own[2] and not own[2] & own[3] and not own[1] & own[0]   # each sub-agent's task its own
    assert demand.prefix[4][: len(demand.prefix[0])] == demand.prefix[0]        # the agent's history goes on
    assert set(demand.session.tolist()) == {0}


def test_the_plan_sends_a_join_when_the_last_sub_agent_has_answered():
    from calculators.plan.fleet import FleetConfig, ReplicaSpec, run_fleet
    from calculators.sim.step_model import StepTimeModel
    from calculators.sim.workload import SimServer

    spec = parse_session("turns:1,tools:1,fanout:2,tool-result:uniform:5:40,schemas:1,call-tokens:5")
    demand = agent_session_demand(_starts(0.0, 0.5), spec, seed=3, block_tokens=16,
                                  prompt=LengthDistribution.fixed(20), output=LengthDistribution.fixed(7))
    model = StepTimeModel(base_s=0.01, per_seq_s=0.001, per_prefill_token_s=1e-5, per_context_token_s=0.0)
    replica = ReplicaSpec(server=SimServer("continuous", num_kv_blocks=2000), step_model=model, num_kv_blocks=2000)
    run = run_fleet(demand, FleetConfig(replica=replica, initial_replicas=2, cold_start_s=0.0))
    assert np.isfinite(run.end_s).all()
    for i, parent in enumerate(demand.after.tolist()):
        if parent >= 0:
            waited = [parent] + [j for k, j in demand.joins if k == i]
            assert run.send_s[i] == pytest.approx(max(run.end_s[j] for j in waited))   # at the last one's end
    subs = [i for i, parent in enumerate(demand.after.tolist()) if parent >= 0 and demand.after[parent] < 0]
    assert len(subs) == 4 and len({run.send_s[i] for i in subs}) == 2   # each pair at once, at its call's end


def test_a_session_summary_counts_whole_sessions_and_how_many_were_open_at_once():
    from calculators.plan.fleet_run import FleetRun
    from calculators.plan.session_outcome import session_summary

    # in send order: session a (rows 0, 1), b (2, 3, 4) and a lone request (5); b's last request never ends
    demand = from_rows([0.0, 1.0, 0.0, 1.0, 1.0, 2.0], [9] * 6, [1] * 6, session=["a", "b", "a", "b", "b", ""],
                       delay_s=[None, None, 0.5, 0.5, 0.5, None])
    assert demand.t_s.tolist() == [0.0, 0.0, 1.0, 1.0, 1.0, 2.0] and demand.after.tolist() == [-1, 0, -1, 2, 3, -1]
    send = np.array([0.0, 1.5, 1.0, 2.0, 3.0, 2.0])
    end = np.array([1.0, 4.0, 1.8, 2.6, np.nan, 2.5])
    run = FleetRun(send, send + 0.1, end, np.ones(6), np.zeros(6, int), np.zeros(6, bool), [], [], 10.0)
    summary = session_summary(demand, run)
    assert summary["sessions"] == 2 and summary["completed"] == 1
    assert summary["completion_s"]["p50"] == pytest.approx(4.0)   # a: sent at 0, its last answer at 4
    assert summary["peak_open"] == 2                               # a (0-4) and b (1-10: unfinished) overlap
    assert summary["mean_open"] == pytest.approx((4 + 9) / 10)
    plain = from_rows([0.0, 1.0], [9, 9], [1, 1])
    assert session_summary(plain, run) is None
