"""Server-Sent Events from OpenAI-compatible streaming endpoints, parsed after the fact.

The client only stamps each received line with its arrival time; this module turns
`(t, line)` pairs into content-chunk times, the response id, usage and errors, so the
receive loop does no JSON work while tokens are still arriving.

A content chunk is one whose choices carry non-empty `delta.content` (chat),
`delta.reasoning_content`/`delta.reasoning` (reasoning models), `text` (completions) or a tool
call's generated text (`delta.tool_calls[].function.name` / `.arguments`, as vLLM streams a call:
those are the tokens the model wrote, so a reply that calls a tool has a TTFT and ITLs too).
Role-only and usage-only chunks are not content: TTFT is the first *content* chunk, of
either kind. The answer begins at the first chunk with answer text (`delta.content` or
`text`): the time to the first answer token (TTFA), equal to TTFT when nothing reasons.
A reasoning chunk is one whose delta carries a reasoning key, text or not (one engine output
each: a token that completes no character still counts), so a stream sent a token per chunk
counts its reasoning tokens exactly.
`first_chunk_time` is the first chunk with any choice at all (a role-only delta, or a token
whose text is held back, e.g. a partial UTF-8 character): the record's `ttft_any_s`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

DONE = object()  # the `data: [DONE]` sentinel


def parse_data_line(line: bytes) -> Any | None:
    """The payload of one SSE `data:` line: a dict, DONE, or None for anything else.

    Comment lines (`: keep-alive`), `event:`/`id:` fields and blank separators give None;
    a `data:` payload that is not JSON gives {"_unparsed": text} so it is not lost.
    """
    line = line.strip()
    if not line.startswith(b"data:"):
        return None
    payload = line[5:].strip()
    if payload == b"[DONE]":
        return DONE
    if not payload:
        return None
    try:
        return json.loads(payload)
    except ValueError:
        return {"_unparsed": payload[:200].decode("utf-8", "replace")}


ANSWER_KEYS = ("content",)
REASONING_KEYS = ("reasoning_content", "reasoning")   # vLLM's two names for a reasoning delta
TEXT_KEYS = ANSWER_KEYS + REASONING_KEYS


def _tool_call_text(delta: dict) -> str:
    """The generated text of a delta's tool calls: each call's function name and arguments fragment."""
    out = []
    for call in delta.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            out += [value for value in (function.get("name"), function.get("arguments"))
                    if isinstance(value, str) and value]
    return "".join(out)


def chunk_text(event: dict, delta_keys: tuple[str, ...] = TEXT_KEYS) -> str:
    """The generated text a chunk carries (empty for role/usage-only chunks): `text` and the delta's
    `delta_keys`; every kind by default (a tool call's text too), the answer alone with ANSWER_KEYS."""
    out = []
    for choice in event.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        text = choice.get("text")
        if text:
            out.append(text)
        delta = choice.get("delta")
        if isinstance(delta, dict):
            for key in delta_keys:
                value = delta.get(key)
                if isinstance(value, str) and value:
                    out.append(value)
            if delta_keys == TEXT_KEYS:
                out.append(_tool_call_text(delta))
    return "".join(out)


def shows_text(line: bytes) -> bool:
    """A stream line that carries generated text (any kind: answer, reasoning, a tool call's), as a client would
    show it; a role-only or usage-only chunk does not."""
    event = parse_data_line(line)
    return isinstance(event, dict) and bool(chunk_text(event))


def answer_text(timed_lines: Iterable[tuple[float, bytes]], body: bytes, *, stream: bool) -> str:
    """The answer of a response (a multi-turn conversation's next history entry): every chunk's answer
    text in order, or a non-streamed body's first choice. A reasoning model's reasoning is left out, as
    chat clients leave it out of the next turn (DeepSeek's API refuses `reasoning_content` in input)."""
    if stream:
        events = (parse_data_line(line) for _, line in timed_lines)
        return "".join(chunk_text(event, ANSWER_KEYS) for event in events if isinstance(event, dict))
    try:
        choice = (json.loads(body or b"null") or {}).get("choices", [{}])[0]
    except (ValueError, AttributeError, IndexError, TypeError):
        return ""
    message = choice.get("message") if isinstance(choice, dict) else None
    text = message.get("content") if isinstance(message, dict) else (choice or {}).get("text")
    return text if isinstance(text, str) else ""


def error_message(obj: Any) -> str | None:
    """A short message from OpenAI's `{"error": {...}}`, FastAPI's `{"detail": ...}`, or text."""
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict):
            return str(err.get("message") or err.get("type") or err)[:200]
        if isinstance(err, str):
            return err[:200]
        if "detail" in obj:
            return str(obj["detail"])[:200]
        if "_unparsed" in obj:
            return obj["_unparsed"]
    return None


def chunk_kinds(event: dict) -> tuple[bool, bool]:
    """(carries answer text, is a reasoning chunk) for one chunk."""
    answer = reasoning = False
    for choice in event.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        if choice.get("text"):
            answer = True
        delta = choice.get("delta")
        if isinstance(delta, dict):
            if (isinstance(delta.get("content"), str) and delta["content"]) or _tool_call_text(delta):
                answer = True   # a tool call is the reply's answer
            if any(isinstance(delta.get(key), str) for key in REASONING_KEYS):
                reasoning = True
    return answer, reasoning


def merge_tool_call_deltas(calls: dict, event: dict) -> None:
    """Add a chunk's `tool_calls` deltas to `calls` (index -> the call so far), as OpenAI's clients
    assemble a streamed call: the first delta of an index brings its id, type and name, the rest append
    to its arguments."""
    for choice in event.get("choices") or ():
        delta = choice.get("delta") if isinstance(choice, dict) else None
        for part in (delta.get("tool_calls") or ()) if isinstance(delta, dict) else ():
            if not isinstance(part, dict):
                continue
            call = calls.setdefault(part.get("index", len(calls)), {"id": None, "type": "function",
                                                                    "function": {"name": "", "arguments": ""}})
            if isinstance(part.get("id"), str):
                call["id"] = part["id"]
            function = part.get("function")
            if isinstance(function, dict):
                if isinstance(function.get("name"), str):
                    call["function"]["name"] += function["name"]
                if isinstance(function.get("arguments"), str):
                    call["function"]["arguments"] += function["arguments"]


def message_tool_calls(body: dict) -> tuple[dict, ...]:
    """A non-streamed chat answer's `message.tool_calls` (its first choice's), () when it has none."""
    try:
        calls = body["choices"][0]["message"].get("tool_calls")
    except (KeyError, IndexError, TypeError, AttributeError):
        return ()
    return tuple(call for call in calls or () if isinstance(call, dict))


@dataclass
class StreamParse:
    content_times: list[float] = field(default_factory=list)  # arrival time of each content chunk
    answer_times: list[float] = field(default_factory=list)   # ... of each chunk with answer text
    reasoning_chunks: int = 0                                 # chunks carrying reasoning (a token each)
    first_chunk_time: float | None = None                     # arrival of the first chunk with a choice
    response_id: str | None = None
    usage: dict | None = None
    saw_done: bool = False
    error: str | None = None  # an error event inside a 200 stream
    text_chars: int = 0
    tool_calls: dict = field(default_factory=dict)   # index -> {"id", "type", "function": {"name", "arguments"}}


def parse_stream(timed_lines: Iterable[tuple[float, bytes]], pause: Callable[[], None] | None = None,
                 pause_every: int = 16) -> StreamParse:
    """Parse a stream's lines. `pause` (if given) is called every `pause_every` lines: the
    Locust process passes `gevent.sleep(0)` so other streams' chunks are read meanwhile."""
    result = StreamParse()
    for number, (t, line) in enumerate(timed_lines, start=1):
        if pause is not None and number % pause_every == 0:
            pause()
        event = parse_data_line(line)
        if event is None:
            continue
        if event is DONE:
            result.saw_done = True
            continue
        if not isinstance(event, dict):
            continue
        if result.response_id is None and isinstance(event.get("id"), str):
            result.response_id = event["id"]
        message = error_message(event)
        if message is not None:
            result.error = result.error or message
            continue
        if isinstance(event.get("usage"), dict):
            result.usage = event["usage"]
        if result.first_chunk_time is None and event.get("choices"):
            result.first_chunk_time = t
        text = chunk_text(event)
        if text:
            result.content_times.append(t)
            result.text_chars += len(text)
        answer, reasoning = chunk_kinds(event)
        if answer:
            result.answer_times.append(t)
            merge_tool_call_deltas(result.tool_calls, event)
        if reasoning:
            result.reasoning_chunks += 1
    return result
