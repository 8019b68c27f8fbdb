"""Inside the Locust process: one agentic session (`--session`, contract.agent_session) from its first
turn to its last, as an agent framework runs it.

Each turn: the main agent's tool rounds, each a request asking a call (`tool_choice: "required"`), then
the tools' wait (one latency draw per call, the calls of a round run in parallel) and their results
sent back; the round that fans out runs its sub-agents instead, each one request, all at once, their
answers joined as its result; then the turn's answer (`tool_choice: "none"`) and the think time. A
request that fails ends the session (its history would lack the answer); the records say where. A
server that answers a "required" round with no call does not call tools: the first such answer is
logged once, naming the server, and the turn goes on with the answer as text.

A tool round asks max_tokens of at least TOOL_ROUND_MIN_TOKENS (a call's JSON needs room: cut short, its
arguments would not parse) and no ignore_eos: the model ends its call itself, as agent frameworks leave it
to. The answers and sub-agents take --output-tokens and --ignore-eos as every other request does.

Every request is sent through `send` (the load run's), so each has its record like any other, with the
session's id, turn, step, agent and the tool wait before it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

import gevent

from contract.agent_session import SessionSpec
from loadgen.client.exchange import Exchange, Outcome
from loadgen.client.sse import answer_text
from loadgen.scenario.route import Prepared, SessionStep
from loadgen.workload.agent_sessions import AgentSession

log = logging.getLogger(__name__)
_warned_no_calls: set[str] = set()
TOOL_ROUND_MIN_TOKENS = 128

Send = Callable[[Prepared, Exchange, float], "Outcome | None"]


class SessionRequests:
    """Renders one session's requests (the chat scenario's render, with its tools)."""

    def __init__(self, scenario, session: AgentSession) -> None:
        self.scenario, self.session = scenario, session
        self.model = scenario.pick_model(session.rng)   # a session keeps its model, as a conversation does

    @property
    def spec(self) -> SessionSpec:
        return self.session.spec

    def main(self, tool_wait_s: float | None) -> Prepared:
        session = self.session
        output_tokens = self.scenario.config.output_tokens.sample(session.rng)
        messages = session.messages()
        final = session.final_step
        last = final and session.turn + 1 == self.spec.turns
        prepared = self._prepared(messages, output_tokens if final else max(output_tokens, TOOL_ROUND_MIN_TOKENS),
                                  session.tool_choice(), SessionStep(session.step + 1, "main", tool_wait_s,
                                                                     last or None),
                                  ignore_eos=None if final else False)
        session.sent()
        return prepared

    def subagent(self, k: int) -> Prepared:
        session = self.session
        task = self.scenario.config.prompt_tokens.sample(session.rng)
        output_tokens = self.spec.tool_result.sample(session.rng)
        return self._prepared(session.subagent_messages(task, k), output_tokens, "none",
                              SessionStep(session.step, f"sub{k + 1}"))

    def _prepared(self, messages: list[dict], output_tokens: int, tool_choice: str, where: SessionStep,
                  ignore_eos: bool | None = None) -> Prepared:
        session = self.session
        request = self.scenario.render(messages, output_tokens, self.model, tools=session.tools,
                                       tool_choice=tool_choice, ignore_eos=ignore_eos, session=session.session_id)
        return Prepared(request, prompt_estimate(messages, session.tools), output_tokens,
                        conversation_id=session.session_id, turn=session.turn + 1,
                        model=self.scenario.recorded_model(self.model), session=where)


def prompt_estimate(messages: list[dict], tools: list[dict]) -> int:
    """The prompt's tokens as asked: its messages' text, calls and tool schemas, one byte a token (the
    chat template adds a few; the record's prompt_tokens is the server's count where it gives one)."""
    size = sum(len((m.get("content") or "").encode()) for m in messages)
    size += sum(len(json.dumps(call["function"]).encode()) for m in messages for call in m.get("tool_calls") or ())
    return size + sum(len(json.dumps(tool).encode()) for tool in tools)


def run_session(requests: SessionRequests, send: Send, *, stopped: Callable[[], bool] = lambda: False,
                think_time_s: float = 0.0, server: str = "the server") -> None:
    """The whole session (module docstring); returns when it ends, fails, or `stopped()` says so."""
    session, stream = requests.session, requests.scenario.stream
    t_ready = time.perf_counter()
    tool_wait: float | None = None
    while not session.done:
        session.start_turn()
        while True:
            if stopped():
                return
            final = session.final_step
            fans_out = session.fans_out
            exchange = Exchange()
            outcome = send(requests.main(tool_wait), exchange, t_ready)
            if outcome is None or outcome.status != "ok":
                return
            text = answer_text(exchange.lines, bytes(exchange.body), stream=stream)
            if final:
                session.answered(text)
                break
            if not outcome.tool_calls:
                if server not in _warned_no_calls:
                    _warned_no_calls.add(server)
                    log.warning("%s answered tool_choice=required without a tool call: it does not call tools "
                                "(vLLM: --enable-auto-tool-choice --tool-call-parser NAME); the session goes on "
                                "with its text", server)
                session.answered_without_call(text)
                tool_wait, t_ready = None, time.perf_counter()
                continue
            # the wait counts from the answer's last byte, not from here: the record and the events
            # fired since are the generator's time, and the session waited through them too
            t_tools = exchange.t_last if exchange.t_last is not None else time.perf_counter()
            calls = list(outcome.tool_calls)
            results = (_fan_out(requests, send, len(calls)) if fans_out else _run_tools(session, len(calls)))
            if results is None:
                return   # a sub-agent failed: the round has no result
            session.called(calls, results)
            t_ready = time.perf_counter()
            tool_wait = t_ready - t_tools
        if not session.done and think_time_s:
            gevent.sleep(think_time_s)
        tool_wait, t_ready = None, time.perf_counter()


def _run_tools(session: AgentSession, calls: int) -> list[str]:
    """The round's calls run at once: the wait is the slowest's latency; one result each."""
    waits = [session.tool_latency() for _ in range(calls)]
    results = [session.tool_result() for _ in range(calls)]
    gevent.sleep(max(waits))
    return results


def _fan_out(requests: SessionRequests, send: Send, calls: int) -> list[str] | None:
    """The round's sub-agents, all at once; their answers, joined, are the first call's result (the
    round's other calls, if any, get the same). None when one failed."""
    count = requests.session.plan.fanout
    prepared = [requests.subagent(k) for k in range(count)]

    def one(p: Prepared) -> str | None:
        exchange = Exchange()
        outcome = send(p, exchange, time.perf_counter())
        if outcome is None or outcome.status != "ok":
            return None
        return answer_text(exchange.lines, bytes(exchange.body), stream=requests.scenario.stream)

    jobs = [gevent.spawn(one, p) for p in prepared]
    try:
        gevent.joinall(jobs, raise_error=True)
    finally:
        gevent.killall([job for job in jobs if not job.dead], block=True)
    answers = [job.value for job in jobs]
    if any(answer is None for answer in answers):
        return None
    joined = "\n\n".join(answers)
    return [joined] * calls
