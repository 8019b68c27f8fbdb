"""Agentic sessions in the simulator (calculators.sim.sessions): small exact cases of what a session sends,
when, and what the engine's prefix cache gives back."""

import math

import numpy as np
import pytest

from calculators.sim.sessions import SessionArrivals, longest_context, simulate_sessions
from calculators.sim.sim_engine import run_engine
from calculators.sim.simulate import SimServer, SimWorkload
from calculators.sim.state import StepClock, Trace
from calculators.sim.step_model import StepTimeModel
from contract.agent_session import CALL_NAME_TOKENS, parse_session
from contract.distributions import LengthDistribution as L

MODEL = StepTimeModel(base_s=0.01)   # every step 10 ms, whatever it holds


def _run(spec_text: str, users: int = 1, n: int = 6, kv_blocks: int | None = 4000, block: int = 16,
         think_s: float = 0.0, answers_cached: bool = True):
    spec = parse_session(spec_text)
    trace = Trace(prompt=np.zeros(n, dtype=np.int64), output=np.zeros(n, dtype=np.int64), arrival=np.zeros(n),
                  first_token=np.full(n, np.nan), end=np.full(n, np.nan),
                  longest=longest_context(spec, L.fixed(20), L.fixed(5)))
    arrivals = SessionArrivals(trace, spec, concurrency=users, prompt_tokens=L.fixed(20), output_tokens=L.fixed(5),
                               think_s=think_s, answers_cached=answers_cached)
    server = SimServer("continuous", num_kv_blocks=kv_blocks, block_size=block)
    run_engine(server, StepClock(MODEL, np.random.default_rng(0)), trace, arrivals)
    return spec, trace, arrivals.log


def test_a_turn_sends_its_history_back_and_finds_it_cached():
    spec, trace, log = _run("turns:2,tools:1,tool-latency:0.5,tool-result:30,schemas:1", n=4)
    prefix = spec.prefix_tokens
    # turn 1: the round (a call of call_tokens), then the answer (5); turn 2 alike
    assert (log.turn, log.step, log.agent) == ([1, 1, 2, 2], [1, 2, 1, 2], [0, 0, 0, 0])
    assert trace.output.tolist() == [spec.call_tokens, 5, spec.call_tokens, 5]
    first = prefix + 20
    second = first + spec.call_tokens + 30            # the call as generated, then the tool's result
    third = second + 5 + 20                           # the answer, then the next user message
    assert trace.prompt.tolist() == [first, second, third, third + spec.call_tokens + 30]
    # what the engine computed of a request (all but its last generated token), in whole blocks, comes back
    assert trace.cached[1] == (first + spec.call_tokens - 1) // 16 * 16
    assert trace.cached[2] == (second + 5 - 1) // 16 * 16
    assert trace.cached[0] == 0   # nothing was there before the first request
    # the next request leaves when the tool is done: its answer's end + the tool's 0.5 s (no front end)
    assert trace.client_send[1] == pytest.approx(trace.end[0] + 0.5)
    assert trace.client_send[2] == pytest.approx(trace.end[1])   # the next turn at once (no think time)
    assert log.last == [False, False, False, True] and list(log.completed) == [0]
    # a call shows at its name's end (the stream's first delta), an answer at its first token
    assert trace.first_answer[0] - trace.first_token[0] == pytest.approx((CALL_NAME_TOKENS - 1) * 0.01)
    assert trace.first_answer[1] == trace.first_token[1]


def test_answers_that_do_not_read_back_as_their_ids_are_new_tokens_to_the_cache():
    spec, trace, _ = _run("turns:2,tools:1,tool-latency:0.5,tool-result:30,schemas:1", n=4, answers_cached=False)
    first = spec.prefix_tokens + 20
    assert trace.prompt[1] == first + spec.call_tokens + 30            # as long as before
    assert trace.cached[1] == (first - 1) // 16 * 16                  # but only what was sent comes back
    assert trace.cached[2] == (trace.prompt[1] - 1) // 16 * 16


def test_a_fan_out_sends_its_sub_agents_at_once_and_joins_their_answers():
    spec, trace, log = _run("turns:1,tools:1,fanout:3,tool-result:7,schemas:1", n=5)
    assert log.agent == [0, 1, 2, 3, 0] and log.step == [1, 1, 1, 1, 2]
    prefix = spec.prefix_tokens
    assert trace.prompt[1:4].tolist() == [prefix + 20] * 3 and trace.output[1:4].tolist() == [7, 7, 7]
    assert len(set(trace.client_send[1:4])) == 1 and trace.client_send[1] == trace.end[0]
    assert trace.client_send[4] == pytest.approx(max(trace.end[1:4]))   # the last sub-agent's answer
    assert trace.prompt[4] == prefix + 20 + spec.call_tokens + 3 * 7    # the joined answers are the result
    # sub-agents share the system prompt and tools with the main agent, not its history
    assert trace.cached[1:4].tolist() == [prefix // 16 * 16] * 3


def test_sessions_follow_each_other_and_each_user_keeps_one_going():
    spec, trace, log = _run("turns:1,tools:0", users=2, n=6, think_s=0.2)
    assert log.session == [0, 1, 2, 3, 4, 5] and set(log.completed) == set(range(6))
    ends = sorted(trace.end)
    assert sorted(trace.client_send)[2:] == pytest.approx(ends[:4])   # each new session at a user's last answer


def test_a_cache_too_small_for_the_histories_misses_what_was_evicted():
    text = "turns:3,tools:1,tool-latency:0.2,tool-result:200,schemas:1"
    _, big, _ = _run(text, users=4, n=24, kv_blocks=4000)
    _, small, _ = _run(text, users=4, n=24, kv_blocks=160)
    assert small.cached.sum() < 0.8 * big.cached.sum()
    assert (small.cached <= big.cached + 16 * 40).all()


def test_calc_simulate_sessions_summarises_turns_and_sessions():
    spec = parse_session("turns:2,tools:1,tool-latency:0.1,tool-result:24,schemas:1")
    workload = SimWorkload(prompt_tokens=L.fixed(16), output_tokens=L.fixed(8), concurrency=2, requests=400,
                           warmup_s=1.0, duration_s=10.0)
    out = simulate_sessions(SimServer("continuous", num_kv_blocks=2000), workload, MODEL, spec)
    assert set(out.by_turn) == {1, 2} and out.sessions_completed > 5
    assert out.by_turn[2].prompt_tokens_mean > out.by_turn[1].prompt_tokens_mean
    assert 0.5 < out.by_turn[2].cached_share < 1
    assert out.completion_p50_s > 2 * 0.1   # two tool waits at least
    assert out.tool_rounds == pytest.approx(out.result.requests / 2, abs=2)
    with pytest.raises(ValueError, match="closed loop in a time window"):
        simulate_sessions(SimServer("continuous"), SimWorkload(concurrency=2), MODEL, spec)
    assert math.isfinite(out.result.metrics["ttft_s"]["p50"])
