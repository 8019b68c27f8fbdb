"""One agentic session's requests (contract.agent_session): the tool schemas it offers, the history it
sends, and what a tool call's result adds to it.

    session = AgentSession(spec, rng, tools=tool_schemas(4), system="...", user_tokens=..., id="w/s0")
    plan = session.start_turn()              # the turn's tool rounds and fan-out, drawn
    messages, choice = session.step_messages(final=False)
    session.called(calls, results)           # the assistant's tool calls and one result each
    session.answered("text")                 # the turn's final answer: the next turn starts from it

Every request sends the system prompt and the tool schemas (the same for every session of a run, so a
prefix cache can share them), then every earlier turn with its calls and results. Text is synthetic
(one ASCII byte a token, loadgen.workload.prompts); a tool result of N tokens is N bytes.

Pure: no locust or gevent; the loop that sends and waits is loadgen.scenario.session_loop.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from contract.agent_session import DEFAULT_SYSTEM, SessionSpec, TurnPlan, tool_schemas
from loadgen.workload.prompts import ascii_text

@dataclass
class AgentSession:
    spec: SessionSpec
    rng: random.Random
    tools: list[dict]
    user_texts: list[str]                  # one user message per turn, drawn up front
    session_id: str
    system: str = DEFAULT_SYSTEM
    history: list[dict] = field(default_factory=list)   # every message after the system prompt
    turn: int = -1                         # 0-based, -1 before the first
    plan: TurnPlan | None = None
    step: int = 0                          # requests of the main agent sent in this turn

    def start_turn(self) -> TurnPlan:
        """The next turn: its user message joins the history, its tool rounds and fan-out are drawn."""
        if self.plan is not None:
            raise ValueError(f"turn {self.turn + 1} started before turn {self.turn + 1} was answered")
        self.turn += 1
        if self.turn >= self.spec.turns:
            raise ValueError(f"session {self.session_id} has {self.spec.turns} turns")
        self.history.append({"role": "user", "content": self.user_texts[self.turn]})
        self.plan, self.step = self.spec.draw_turn(self.rng), 0
        return self.plan

    @property
    def final_step(self) -> bool:
        """The next request is the turn's answer (its tool rounds are done)."""
        return self.plan is not None and self.step >= self.plan.tool_rounds

    @property
    def fans_out(self) -> bool:
        """The next tool round is the turn's first and runs sub-agents."""
        return self.plan is not None and self.step == 0 and self.plan.fanout > 0

    def messages(self) -> list[dict]:
        return [{"role": "system", "content": self.system}, *self.history]

    def tool_choice(self) -> str:
        """The next request's: a tool round asks a call ("required"), the answer none ("none")."""
        return "none" if self.final_step else "required"

    def sent(self) -> None:
        self.step += 1

    def called(self, calls: list[dict], results: list[str]) -> None:
        """The assistant's tool calls (as its answer carried them) and one result each join the history."""
        if len(calls) != len(results):
            raise ValueError(f"{len(calls)} tool calls but {len(results)} results")
        self.history.append({"role": "assistant", "content": None,
                             "tool_calls": [_clean_call(call, self.session_id, self.turn, k)
                                            for k, call in enumerate(calls)]})
        for call, result in zip(self.history[-1]["tool_calls"], results):
            self.history.append({"role": "tool", "tool_call_id": call["id"], "content": result})

    def answered_without_call(self, text: str) -> None:
        """A tool round whose answer called nothing (a server that does not call tools): its text joins the
        history as an assistant turn, and the turn goes on to its next request."""
        self.history.append({"role": "assistant", "content": text})

    def answered(self, text: str) -> None:
        """The turn's final answer: the turn ends."""
        self.history.append({"role": "assistant", "content": text})
        self.plan = None

    def tool_result(self) -> str:
        """A tool's result: `tool-result` tokens of text."""
        return ascii_text(self.spec.tool_result.sample(self.rng), self.rng)

    def tool_latency(self) -> float:
        return self.spec.tool_latency.sample(self.rng)

    def subagent_messages(self, task_tokens: int, k: int) -> list[dict]:
        """Sub-agent k's one request: the system prompt and a task of its own (the tools are offered too,
        none is asked for)."""
        task = ascii_text(task_tokens, random.Random(f"{self.session_id}/t{self.turn}/sub{k}"))
        return [{"role": "system", "content": self.system}, {"role": "user", "content": task}]

    @property
    def done(self) -> bool:
        return self.plan is None and self.turn + 1 >= self.spec.turns


def _clean_call(call: dict, session_id: str, turn: int, k: int) -> dict:
    """The call as the next request sends it back: id, type, name and arguments (an id made up when the
    server sent none, so the tool message can name it)."""
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    arguments = function.get("arguments")
    return {"id": call.get("id") or f"call-{session_id}-{turn}-{k}", "type": "function",
            "function": {"name": str(function.get("name") or ""),
                         "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments or {})}}


def new_session(spec: SessionSpec, rng: random.Random, prompt_tokens, session_id: str,
                system: str | None = None) -> AgentSession:
    """A session whose user messages are `prompt_tokens` draws (a LengthDistribution), drawn first."""
    users = [ascii_text(prompt_tokens.sample(rng), rng) for _ in range(spec.turns)]
    return AgentSession(spec, rng, tool_schemas(spec.schemas), users, session_id,
                        system=system or DEFAULT_SYSTEM)
