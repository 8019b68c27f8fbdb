"""`--session SPEC`: an agentic session as a workload, the same spec for every command that takes it.

A session is `turns` user turns. Each turn sends the whole history (system prompt, the offered tool
schemas, every earlier turn, call and tool result) and runs as an agent loop: `tools` tool rounds,
each a request whose answer is a tool call (sent with `tool_choice: "required"`), then a wait while
the tool runs (a `tool-latency` draw) and a tool result of `tool-result` tokens appended to the
history; then the turn's final request (`tool_choice: "none"`) answers the user. A turn that fans
out (`fanout`) runs its first tool round as that many sub-agents in parallel, each one request of
its own (the system prompt, the tools and a task of `--prompt-tokens`), whose answers, joined, are
the round's tool result. Asking the calls with `tool_choice` rather than leaving them to the model
keeps the load the same on every server: a planner asks what N tool rounds cost, not what a random
model chooses.

    turns:8,tools:0-3,tool-latency:lognormal:1.5:0.8,tool-result:uniform:64:512,fanout:0-2,schemas:6

    turns:N               user turns per session (default 4)
    tools:LO-HI | N       tool rounds per turn, drawn uniformly (default 0-2)
    tool-latency:DIST     seconds a tool takes: S | uniform:LO:HI | exponential:MEAN |
                          lognormal:MEAN:SIGMA (mean of the latencies; default lognormal:1:0.5)
    tool-result:LENGTH    tokens of each tool result, a length form (contract.distributions; default 256)
    fanout:LO-HI | N      sub-agents in a turn's first tool round (default 0: none)
    schemas:N             tools offered on every request (default 4)
    call-tokens:N         the simulator's length of a tool call's text (default CALL_TOKENS: the Hermes text
                          the reference server writes for a call to these tools); the load generator
                          reads each call's length off the server's answer

The tools (`tool_schemas`) and the agent's system prompt are the same for every session of a run, so a
prefix cache can share them; `prefix_tokens` is their size, one byte a token (the reference server's
tokenizer; its chat template adds a few).

Pure: parsing and drawing only.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field

from contract.distributions import LengthDistribution, parse_length_distribution

OPTION = "--session"
LATENCY_KINDS = {"fixed": 1, "uniform": 2, "exponential": 1, "lognormal": 2}
KEYS = ("turns", "tools", "tool-latency", "tool-result", "fanout", "schemas", "call-tokens")
DEFAULT_SYSTEM = "You are an agent. Use the tools to answer; call them as often as the task needs."
# '<tool_call>\n{"name": "tool_0", "arguments": {"query": "abcdefgh", "limit": 42}}\n</tool_call>': the reference
# server's Hermes text for a call to `tool_schemas` (an 8-letter string, an integer of 0-100)
CALL_TOKENS = 92
# a streamed call shows nothing until its name is whole: vLLM's Hermes parser, and the reference server after
# it, send the call's first delta (id, type, name) once '<tool_call>\n{"name": "tool_0"' is generated, so a
# tool round's time to first token is that many tokens' time
CALL_NAME_TOKENS = 29


def tool_schemas(count: int) -> list[dict]:
    """`count` OpenAI function tools, the same for every session (a shared prefix): tool_0 ... tool_N-1,
    each with a string query and an integer limit, both required."""
    return [{"type": "function", "function": {
        "name": f"tool_{k}", "description": f"Look up part {k} of the workspace and return what it finds.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                        "limit": {"type": "integer"}},
                       "required": ["query", "limit"]}}} for k in range(count)]


@dataclass(frozen=True)
class LatencyDistribution:
    """A tool's latency in seconds: fixed, uniform, exponential (its mean) or lognormal (mean, sigma of
    the underlying normal, as the length forms take them)."""

    kind: str
    params: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.kind not in LATENCY_KINDS:
            raise ValueError(f"{OPTION} tool-latency: kind must be one of {', '.join(LATENCY_KINDS)}, "
                             f"got {self.kind!r}")
        if len(self.params) != LATENCY_KINDS[self.kind]:
            raise ValueError(f"{OPTION} tool-latency: {self.kind} takes {LATENCY_KINDS[self.kind]} number(s), "
                             f"got {len(self.params)}")
        if any(not math.isfinite(p) or p < 0 for p in self.params):
            raise ValueError(f"{OPTION} tool-latency: seconds must be finite and >= 0, got {self.params!r}")
        if self.kind == "uniform" and self.params[1] < self.params[0]:
            raise ValueError(f"{OPTION} tool-latency: uniform high ({self.params[1]}) must be >= low "
                             f"({self.params[0]})")

    def sample(self, rng: random.Random) -> float:
        p = self.params
        if self.kind == "fixed":
            return p[0]
        if self.kind == "uniform":
            return rng.uniform(p[0], p[1])
        if self.kind == "exponential":
            return rng.expovariate(1 / p[0]) if p[0] > 0 else 0.0
        if p[0] == 0:
            return 0.0
        return rng.lognormvariate(math.log(p[0]) - p[1] * p[1] / 2, p[1])

    @property
    def mean(self) -> float:
        return (self.params[0] + self.params[1]) / 2 if self.kind == "uniform" else self.params[0]


def parse_latency(text: str) -> LatencyDistribution:
    parts = text.split(":")
    if len(parts) == 1:
        return LatencyDistribution("fixed", (_number(parts[0], "tool-latency"),))
    return LatencyDistribution(parts[0], tuple(_number(part, "tool-latency") for part in parts[1:]))


@dataclass(frozen=True)
class SessionSpec:
    turns: int = 4
    tools: tuple[int, int] = (0, 2)
    tool_latency: LatencyDistribution = field(default_factory=lambda: LatencyDistribution("lognormal", (1.0, 0.5)))
    tool_result: LengthDistribution = field(default_factory=lambda: LengthDistribution.fixed(256))
    fanout: tuple[int, int] = (0, 0)
    schemas: int = 4
    call_tokens: int = CALL_TOKENS
    spec: str = ""

    def __post_init__(self) -> None:
        if self.turns < 1:
            raise ValueError(f"{OPTION} turns must be >= 1, got {self.turns}")
        if self.schemas < 1:
            raise ValueError(f"{OPTION} schemas must be >= 1 (a session offers tools), got {self.schemas}")
        if self.fanout[1] and self.tools[1] == 0:
            raise ValueError(f"{OPTION} fanout runs in a turn's first tool round: it needs tools above 0")
        if self.call_tokens < 1:
            raise ValueError(f"{OPTION} call-tokens must be >= 1, got {self.call_tokens}")

    @property
    def prefix_tokens(self) -> int:
        """The system prompt and the tool schemas every request begins with, one byte a token."""
        return len(DEFAULT_SYSTEM) + sum(len(json.dumps(tool)) for tool in tool_schemas(self.schemas))
    def draw_turn(self, rng: random.Random) -> "TurnPlan":
        """One turn's tool rounds and fan-out (drawn in that order, then nothing else)."""
        rounds = rng.randint(*self.tools)
        fanout = rng.randint(*self.fanout)
        return TurnPlan(rounds, fanout if rounds else 0)


@dataclass(frozen=True)
class TurnPlan:
    tool_rounds: int     # tool calls before the final answer
    fanout: int          # sub-agents in the first round (0: that round is a tool)

    @property
    def requests(self) -> int:
        """Requests of the main agent in the turn: one per tool round and the final answer."""
        return self.tool_rounds + 1


def parse_session(text: str | None) -> SessionSpec | None:
    """The module doc's spec -> SessionSpec (None for no spec); ValueError naming the part that is wrong."""
    if text is None or not str(text).strip():
        return None
    values: dict = {}
    for item in str(text).split(","):
        key, sep, value = item.strip().partition(":")
        if not sep or not value:
            raise ValueError(f"{OPTION}: {item.strip()!r} is not KEY:VALUE (keys: {', '.join(KEYS)})")
        if key not in KEYS:
            raise ValueError(f"{OPTION}: unknown key {key!r} (keys: {', '.join(KEYS)})")
        if key in values:
            raise ValueError(f"{OPTION}: {key} given twice")
        values[key] = value
    spec = SessionSpec()
    return SessionSpec(
        turns=_whole(values["turns"], "turns") if "turns" in values else spec.turns,
        tools=_range(values["tools"], "tools") if "tools" in values else spec.tools,
        tool_latency=parse_latency(values["tool-latency"]) if "tool-latency" in values else spec.tool_latency,
        tool_result=(parse_length_distribution(values["tool-result"], f"{OPTION} tool-result")
                     if "tool-result" in values else spec.tool_result),
        fanout=_range(values["fanout"], "fanout") if "fanout" in values else spec.fanout,
        schemas=_whole(values["schemas"], "schemas") if "schemas" in values else spec.schemas,
        call_tokens=_whole(values["call-tokens"], "call-tokens") if "call-tokens" in values else spec.call_tokens,
        spec=str(text).strip())


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{OPTION} {what}: {text!r} is not a number") from None
    return value


def _whole(text: str, what: str, low: int = 0) -> int:
    value = _number(text, what)
    if not math.isfinite(value) or value != int(value) or value < low:
        raise ValueError(f"{OPTION} {what}: {text!r} is not a whole number >= {low}")
    return int(value)


def _range(text: str, what: str) -> tuple[int, int]:
    low, sep, high = text.partition("-")
    low_n = _whole(low, what)
    high_n = _whole(high, what) if sep else low_n
    if high_n < low_n:
        raise ValueError(f"{OPTION} {what}: {text!r} runs backwards (LO-HI with LO <= HI)")
    return low_n, high_n
