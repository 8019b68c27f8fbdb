"""One agentic session's history (loadgen.workload.agent_sessions), the tool calls read off an answer
(loadgen.client.sse), and the loop that runs a session (loadgen.scenario.session_loop) with its sends
answered in-process."""

import json
import random

import gevent
import pytest

from contract.agent_session import parse_session
from contract.distributions import LengthDistribution
from loadgen.client.exchange import Exchange, Outcome
from loadgen.client.sse import merge_tool_call_deltas, message_tool_calls
from loadgen.scenario import session_loop
from loadgen.scenario.session_loop import SessionRequests, prompt_estimate, run_session
from loadgen.workload.agent_sessions import new_session, tool_schemas


def _session(text="turns:2,tools:1,tool-latency:0,tool-result:5", seed=0):
    return new_session(parse_session(text), random.Random(seed), LengthDistribution.fixed(4), "w/s0")


def test_a_turn_sends_the_whole_history_with_its_calls_and_results():
    session = _session()
    plan = session.start_turn()
    assert plan.tool_rounds == 1 and not session.final_step and session.tool_choice() == "required"
    first = session.messages()
    assert [m["role"] for m in first] == ["system", "user"] and len(first[1]["content"]) == 4
    session.sent()
    session.called([{"id": "c1", "type": "function", "function": {"name": "tool_0", "arguments": '{"q": 1}'}}],
                   ["abcde"])
    assert session.final_step and session.tool_choice() == "none"
    assert session.messages()[2:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "tool_0", "arguments": '{"q": 1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "abcde"}]
    session.sent()
    session.answered("done")
    assert not session.done
    session.start_turn()
    roles = [m["role"] for m in session.messages()]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    with pytest.raises(ValueError, match="1 tool calls but 2 results"):
        session.called([{"id": "x", "function": {"name": "tool_0"}}], ["a", "b"])


def test_a_call_without_an_id_gets_one_the_tool_message_can_name():
    session = _session()
    session.start_turn()
    session.called([{"function": {"name": "tool_1", "arguments": {"a": 1}}}], ["r"])
    call = session.history[-2]["tool_calls"][0]
    assert call["id"] == "call-w/s0-0-0" and call["function"]["arguments"] == '{"a": 1}'
    assert session.history[-1]["tool_call_id"] == "call-w/s0-0-0"


def test_the_tools_are_the_same_for_every_session():
    assert tool_schemas(3) == _session("turns:1,schemas:3").tools
    assert [t["function"]["name"] for t in tool_schemas(3)] == ["tool_0", "tool_1", "tool_2"]


def test_streamed_tool_call_deltas_assemble_as_openai_clients_do():
    calls: dict = {}
    for delta in ({"tool_calls": [{"index": 0, "id": "call-1", "type": "function", "function": {"name": "tool_2"}}]},
                  {"tool_calls": [{"index": 0, "function": {"arguments": '{"query": '}}]},
                  {"tool_calls": [{"index": 0, "function": {"arguments": '"x"}'}}]},
                  {"tool_calls": [{"index": 1, "id": "call-2", "function": {"name": "tool_0", "arguments": "{}"}}]}):
        merge_tool_call_deltas(calls, {"choices": [{"index": 0, "delta": delta}]})
    assert calls == {0: {"id": "call-1", "type": "function", "function": {"name": "tool_2", "arguments": '{"query": "x"}'}},
                     1: {"id": "call-2", "type": "function", "function": {"name": "tool_0", "arguments": "{}"}}}
    body = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [{"id": "a"}]}}]}
    assert message_tool_calls(body) == ({"id": "a"},)
    assert message_tool_calls({"choices": [{"message": {"content": "hi"}}]}) == ()
    assert message_tool_calls({}) == ()


def test_the_prompt_estimate_counts_text_calls_and_schemas():
    tools = tool_schemas(1)
    messages = [{"role": "user", "content": "abcd"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "i", "function": {"name": "n",
                                                                                                "arguments": "{}"}}]}]
    expected = 4 + len(json.dumps({"name": "n", "arguments": "{}"})) + len(json.dumps(tools[0]))
    assert prompt_estimate(messages, tools) == expected


class _Config:
    output_tokens = LengthDistribution.fixed(8)
    prompt_tokens = LengthDistribution.fixed(4)


class _Scenario:
    """Renders a request as its JSON body (what the loop asks of the chat scenario)."""

    stream = False
    config = _Config()

    def pick_model(self, rng):
        return "m"

    def recorded_model(self, model):
        return None

    def render(self, messages, output_tokens, model, *, tools, tool_choice, ignore_eos=None, session=None):
        return json.dumps({"messages": messages, "max_tokens": output_tokens, "tool_choice": tool_choice,
                           "ignore_eos": ignore_eos, "session": session}).encode()


def _answer(call: bool, text: str = "ok") -> tuple[Outcome, bytes]:
    calls = ({"id": "c", "type": "function", "function": {"name": "tool_0", "arguments": "{}"}},) if call else ()
    message = {"role": "assistant", "content": None if call else text, "tool_calls": list(calls) or None}
    return (Outcome("ok", None, 0.01, 0.02, [], "r", 1, 1, "server", tool_calls=calls),
            json.dumps({"choices": [{"message": message}]}).encode())


def _run(spec: str, answer, seed: int = 0):
    """Run one session; `answer(body, sent_so_far)` gives (outcome, body bytes). Returns the sends."""
    sent = []

    def send(prepared, exchange: Exchange, t_ready):
        body = json.loads(prepared.request)
        sent.append((prepared, body))
        outcome, raw = answer(body, sent)
        exchange.body.extend(raw)
        return outcome

    session = new_session(parse_session(spec), random.Random(seed), LengthDistribution.fixed(4), "w/s0")
    gevent.spawn(run_session, SessionRequests(_Scenario(), session), send).join(timeout=10)
    return sent


def test_the_loop_asks_calls_waits_for_the_tools_and_ends_with_the_answer():
    sent = _run("turns:2,tools:2,tool-latency:0.05,tool-result:3",
                lambda body, _: _answer(body["tool_choice"] == "required"))
    assert [(p.turn, p.session.step, body["tool_choice"]) for p, body in sent] == [
        (1, 1, "required"), (1, 2, "required"), (1, 3, "none"), (2, 1, "required"), (2, 2, "required"), (2, 3, "none")]
    assert [p.session.session_end for p, _ in sent] == [None] * 5 + [True]
    waits = [p.session.tool_wait_s for p, _ in sent]
    assert waits[0] is None and waits[3] is None   # a turn's first request follows the user, not a tool
    assert all(w >= 0.05 for w in (waits[1], waits[2], waits[4], waits[5]))
    # a tool round asks room for its call and leaves the end to the model; the answer is a request like any other
    assert [(p.output_tokens_asked, body["ignore_eos"]) for p, body in sent[:3]] == [
        (session_loop.TOOL_ROUND_MIN_TOKENS, False), (session_loop.TOOL_ROUND_MIN_TOKENS, False), (8, None)]
    last = sent[-1][1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant",
                                         "user", "assistant", "tool", "assistant", "tool"]
    assert all(len(m["content"]) == 3 for m in last if m["role"] == "tool")
    assert {body["session"] for _, body in sent} == {"w/s0"}   # every request keyed by its session


def test_a_fan_out_runs_its_sub_agents_at_once_and_joins_their_answers():
    def answer(body, sent):
        if body["messages"][-1]["role"] == "user" and len(body["messages"]) == 2 and body["tool_choice"] == "none":
            name = f"sub{len(sent)}"
            gevent.sleep(0.1)   # a sub-agent (its own two messages): each takes 0.1 s
            return _answer(False, name)
        return _answer(body["tool_choice"] == "required")

    sent = _run("turns:1,tools:1,fanout:3,tool-result:5", answer)
    agents = [p.session.agent for p, _ in sent]
    assert agents == ["main", "sub1", "sub2", "sub3", "main"]
    assert {body["session"] for _, body in sent} == {"w/s0"}   # its sub-agents too: one session, one replica
    assert 0.1 <= sent[-1][0].session.tool_wait_s < 0.25   # at once: one sub-agent's time, not three
    result = sent[-1][1]["messages"][-1]
    assert result["role"] == "tool" and result["content"] == "sub2\n\nsub3\n\nsub4"
    assert all(p.output_tokens_asked == 5 for p, _ in sent[1:4])   # a sub-agent answers a tool result's length


def test_a_failed_request_ends_the_session_and_a_server_without_tools_is_named(caplog):
    failed = Outcome("http_500", "boom", None, 0.01, [], None, 1, None, "none")
    sent = _run("turns:3,tools:1", lambda body, sent: (failed, b"{}") if len(sent) == 2 else _answer(True))
    assert len(sent) == 2   # the second request failed: nothing after it
    session_loop._warned_no_calls.clear()
    with caplog.at_level("WARNING"):
        sent = _run("turns:1,tools:2", lambda body, _: _answer(False, "plain"))
    assert [body["tool_choice"] for _, body in sent] == ["required", "required", "none"]
    assert [m["role"] for m in sent[-1][1]["messages"]] == ["system", "user", "assistant", "assistant"]
    assert sum("without a tool call: it does not call tools" in r.message for r in caplog.records) == 1
