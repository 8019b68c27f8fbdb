"""Tool calls on the wire, as OpenAI's API and vLLM's Hermes-style tool parser carry them.

A chat request may offer `tools` (functions with JSON-schema `parameters`) and a `tool_choice`:
`none` never calls one, `required` always calls one, a named function (`{"type": "function",
"function": {"name": N}}`) calls that one, `auto` (the default when tools are offered) calls one at
the server's `--tool-call-rate` (default 0: a seeded random model has no reason to). Which tool, and
its arguments, are seeded draws: one value of each required property's type (every property when none
is required), an enum's first value.

What the model "generates" for a call is the Hermes text vLLM's `hermes` tool parser reads:
`<tool_call>\\n{"name": N, "arguments": {...}}\\n</tool_call>`, one token a byte, so a call's
completion tokens are that text's length (capped by max_tokens: a truncated call ends "length" with
its arguments cut, as a model's would). The answer carries it as `message.tool_calls` (content null,
finish_reason `tool_calls`); a stream sends the call's id, type and name in one chunk once the text has
passed the name, then the arguments in fragments as the tokens arrive, as vLLM streams them.

In the prompt, tools follow the Qwen/Hermes chat templates: their JSON in a `<tools>` block at the end
of the system turn (a system turn is added if there is none); an assistant turn's earlier calls as
`<tool_call>` blocks after its text; a `tool` message as a user turn holding `<tool_response>`.
"""

from __future__ import annotations

import json
import random
import secrets
from dataclasses import dataclass

CALL_OPEN, CALL_CLOSE = "<tool_call>\n", "\n</tool_call>"
RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>\n", "\n</tool_response>"
TOOLS_OPEN, TOOLS_CLOSE = "\n\n# Tools\n<tools>\n", "\n</tools>"


@dataclass(frozen=True)
class PlannedCall:
    """The one call a response makes: its id, function name, arguments (a JSON string) and Hermes text."""

    id: str
    name: str
    arguments: str

    @property
    def text(self) -> str:
        return f'{CALL_OPEN}{{"name": {json.dumps(self.name)}, "arguments": {self.arguments}}}{CALL_CLOSE}'

    @property
    def name_end(self) -> int:
        """Bytes of `text` up to and including the name (then a stream may name the call)."""
        return len(f'{CALL_OPEN}{{"name": {json.dumps(self.name)}'.encode())

    @property
    def arguments_span(self) -> tuple[int, int]:
        start = len(f'{CALL_OPEN}{{"name": {json.dumps(self.name)}, "arguments": '.encode())
        return start, start + len(self.arguments.encode())


def choose_call(tools: list[dict], tool_choice, rate: float, rng: random.Random) -> PlannedCall | None:
    """The call this response makes, or None; ValueError names a tool_choice that names no offered tool."""
    if not tools or tool_choice == "none":
        return None
    by_name = {tool["function"]["name"]: tool["function"] for tool in tools}
    if isinstance(tool_choice, dict):
        name = tool_choice["function"]["name"]
        if name not in by_name:
            raise ValueError(f"tool_choice names {name!r}, which is not among the tools offered "
                             f"({', '.join(by_name)})")
        function = by_name[name]
    elif tool_choice == "required" or rng.random() < rate:
        function = by_name[rng.choice(sorted(by_name))]
    else:
        return None
    arguments = json.dumps(_arguments(function.get("parameters") or {}, rng))
    return PlannedCall(f"chatcmpl-tool-{secrets.token_hex(16)}", function["name"], arguments)


def _arguments(schema: dict, rng: random.Random) -> dict:
    properties = schema.get("properties") or {}
    names = schema.get("required") or list(properties)
    return {name: _value(properties.get(name) or {}, rng) for name in names}


def _value(schema: dict, rng: random.Random):
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "integer":
        return rng.randint(0, 100)
    if kind == "number":
        return round(rng.uniform(0, 100), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return []
    if kind == "object":
        return _arguments(schema, rng)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(8))


def tools_block(tools: list[dict]) -> str:
    """The tools' JSON as the system turn ends with it."""
    return TOOLS_OPEN + "\n".join(json.dumps(tool, separators=(", ", ": ")) for tool in tools) + TOOLS_CLOSE


def call_block(name: str, arguments: str) -> str:
    """An earlier call as its assistant turn shows it (`arguments`: the JSON string OpenAI carries)."""
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        parsed = arguments
    return f'{CALL_OPEN}{json.dumps({"name": name, "arguments": parsed})}{CALL_CLOSE}'


def response_block(content: str) -> str:
    return RESPONSE_OPEN + content + RESPONSE_CLOSE


class CallStream:
    """Turns a call's generated tokens (bytes of its text, in order) into OpenAI tool-call deltas."""

    def __init__(self, call: PlannedCall) -> None:
        self.call = call
        self.done = 0          # bytes of the call's text generated so far
        self.named = False

    def advance(self, num_new_tokens: int) -> dict | None:
        """The `tool_calls` delta for the next `num_new_tokens` bytes, or None when they add nothing."""
        start, self.done = self.done, self.done + num_new_tokens
        entry: dict = {"index": 0}
        if not self.named and self.done >= self.call.name_end:
            self.named = True
            entry.update(id=self.call.id, type="function", function={"name": self.call.name})
        if self.named:
            first, last = self.call.arguments_span
            raw = self.call.arguments.encode()
            fragment = raw[max(start, first) - first:max(min(self.done, last) - first, 0)] if self.done > first else b""
            if fragment:
                entry.setdefault("function", {})["arguments"] = fragment.decode("utf-8", errors="ignore")
        return {"tool_calls": [entry]} if len(entry) > 1 else None

    def message_calls(self) -> list[dict]:
        """The call as the non-streamed message carries it (its arguments cut where generation stopped)."""
        first, last = self.call.arguments_span
        arguments = self.call.arguments.encode()[:max(0, min(self.done, last) - first)].decode("utf-8", "ignore")
        return [{"id": self.call.id, "type": "function", "function": {"name": self.call.name,
                                                                      "arguments": arguments}}]
