"""One HTTP exchange as the client saw it, and the record fields it yields.

`Exchange` is filled in place by the gevent client while the response arrives, so a
request cut short (timeout, error, test stopped) still holds everything received.
`summarize` is pure: times are `time.perf_counter()` seconds; `t_start` is converted
to unix time by the caller's clock anchor.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from loadgen.client.sse import error_message, message_tool_calls, parse_stream


@dataclass
class Exchange:
    t_start: float | None = None      # perf_counter just before the request's first byte was written
    status_code: int | None = None
    lines: list[tuple[float, bytes]] = field(default_factory=list)  # SSE lines with arrival times
    body: bytearray = field(default_factory=bytearray)              # non-streamed body
    t_last: float | None = None       # perf_counter when the last byte so far arrived
    complete: bool = False            # the whole response was read
    failure: str | None = None        # "timeout" | "error" when the exchange broke
    failure_message: str | None = None
    replica: str | None = None        # the x-servecap-replica response header: which replica of a fleet answered
    grpc_status: str | None = None    # a gRPC call (loadgen.client.grpc_unary): "OK" or the status code's name
    on_shown: Callable[[], None] | None = field(default=None, repr=False)   # called once, when the answer first
                                      # shows: its first stream line of a 200, or a whole 200 body (hedging)


@dataclass(frozen=True)
class Outcome:
    status: str
    error: str | None
    ttft_s: float | None
    e2e_s: float | None
    itl_s: list[float]
    response_id: str | None
    prompt_tokens: int | None
    output_tokens: int | None
    usage_from: str  # "server" | "counted" | "none"
    ttft_any_s: float | None = None  # first chunk of any kind (streams only)
    replica: str | None = None       # the replica that answered (the x-servecap-replica header), when named
    ttfa_s: float | None = None      # first answer token (after any reasoning); streams only
    reasoning_tokens: int | None = None   # the server's usage count, else the reasoning chunks counted
    answer_tokens: int | None = None      # output tokens less reasoning tokens
    tool_calls: tuple[dict, ...] = ()     # the answer's tool calls, assembled ({"id", "type", "function"})
    cached_tokens: int | None = None      # usage.prompt_tokens_details.cached_tokens (the server's prefix hits)


def _gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:])]


def summarize(exchange: Exchange, *, stream: bool, prompt_tokens_asked: int | None, stopped: bool = False,
              pause: Callable[[], None] | None = None) -> Outcome:
    """Record fields for an exchange. `stopped`: the test ended while it was in flight;
    `pause`: called now and then while parsing a long stream (see sse.parse_stream)."""
    t0 = exchange.t_start
    e2e = None if (t0 is None or exchange.t_last is None) else exchange.t_last - t0
    if exchange.grpc_status is not None:
        return _grpc_outcome(exchange, e2e, prompt_tokens_asked, stopped)
    code = exchange.status_code

    if code is not None and code != 200:
        message = None
        try:
            message = error_message(json.loads(bytes(exchange.body) or b"null"))
        except ValueError:
            message = bytes(exchange.body[:200]).decode("utf-8", "replace") or None
        return Outcome(f"http_{code}", message or f"HTTP {code}", None, e2e, [], None,
                       prompt_tokens_asked, None, "none", replica=exchange.replica)

    if stream:
        parsed = parse_stream(exchange.lines, pause)
        ttft = parsed.content_times[0] - t0 if (parsed.content_times and t0 is not None) else None
        ttft_any = parsed.first_chunk_time - t0 if (parsed.first_chunk_time is not None and t0 is not None) else None
        itl = _gaps(parsed.content_times)
        response_id, usage, error = parsed.response_id, parsed.usage, parsed.error
        counted_output = len(parsed.content_times)
        ttfa = parsed.answer_times[0] - t0 if (parsed.answer_times and t0 is not None) else None
        counted_reasoning = parsed.reasoning_chunks
        tool_calls = tuple(parsed.tool_calls[index] for index in sorted(parsed.tool_calls))
    else:
        ttft, ttft_any, itl, counted_output, error = None, None, [], None, None
        ttfa, counted_reasoning = None, None
        obj: Any = None
        if exchange.complete:
            try:
                obj = json.loads(bytes(exchange.body))
            except ValueError:
                error = "response body is not JSON"
        obj = obj if isinstance(obj, dict) else {}
        response_id = obj.get("id") if isinstance(obj.get("id"), str) else None
        usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
        error = error or error_message(obj)
        tool_calls = message_tool_calls(obj)

    if usage and isinstance(usage.get("completion_tokens"), int):
        prompt_tokens = usage.get("prompt_tokens", prompt_tokens_asked)
        output_tokens, usage_from = usage["completion_tokens"], "server"
    elif usage and isinstance(usage.get("prompt_tokens"), int) and not stream:   # embeddings: no output
        prompt_tokens, output_tokens, usage_from = usage["prompt_tokens"], None, "server"
    else:
        prompt_tokens = prompt_tokens_asked
        output_tokens = counted_output
        usage_from = "counted" if counted_output is not None else "none"

    if exchange.failure is not None:
        status, message = exchange.failure, exchange.failure_message
    elif stopped:
        status, message = "incomplete", "test stopped while the request was in flight"
    elif not exchange.complete:
        status, message = "error", "connection closed before the response was complete"
    elif error is not None:
        status, message = "error", error
    else:
        status, message = "ok", None
    reasoning = _reasoning_tokens(usage, counted_reasoning)
    cached = _cached_tokens(usage)
    answer = output_tokens - reasoning if (output_tokens is not None and reasoning is not None) else None
    return Outcome(status, message, ttft, e2e, itl, response_id, prompt_tokens, output_tokens, usage_from, ttft_any,
                   replica=exchange.replica, ttfa_s=ttfa, reasoning_tokens=reasoning, answer_tokens=answer,
                   tool_calls=tool_calls, cached_tokens=cached)


def _cached_tokens(usage: dict | None) -> int | None:
    """The prompt tokens the server took from its prefix cache, where its usage says (OpenAI's
    prompt_tokens_details.cached_tokens; vLLM with --enable-prompt-tokens-details, the reference server)."""
    details = (usage or {}).get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return cached if isinstance(cached, int) and not isinstance(cached, bool) and cached >= 0 else None


def _reasoning_tokens(usage: dict | None, counted: int | None) -> int | None:
    """The reasoning tokens of a response: the server's usage count, but never fewer than the reasoning
    chunks streamed (each carries at least one token). vLLM counts only the tokens it sees between <think>
    and </think> in what it generated, so a model whose chat template opens <think> in the prompt
    (DeepSeek-R1's, Qwen3's) streams its reasoning while its usage says 0."""
    details = (usage or {}).get("completion_tokens_details")
    said = details.get("reasoning_tokens") if isinstance(details, dict) else None
    said = said if isinstance(said, int) and not isinstance(said, bool) else None
    if said is None or counted is None:
        return counted if said is None else said
    return max(said, counted)


def _grpc_outcome(exchange: Exchange, e2e: float | None, prompt_tokens_asked: int | None, stopped: bool) -> Outcome:
    """A KServe V2 gRPC call's fields: status "grpc_<code>" for a status other than OK (as "http_<code>"
    for HTTP), the reply's id as the response id."""
    from contract.open_inference.open_inference_pb2 import ModelInferResponse
    from google.protobuf.message import DecodeError

    response_id, status, message = None, "ok", None
    if exchange.failure is not None:
        status, message = exchange.failure, exchange.failure_message
    elif exchange.grpc_status != "OK":
        status, message = f"grpc_{exchange.grpc_status.lower()}", exchange.failure_message
    elif stopped:
        status, message = "incomplete", "test stopped while the request was in flight"
    else:
        try:
            response_id = ModelInferResponse.FromString(bytes(exchange.body)).id or None
        except DecodeError:
            status, message = "error", "the reply is not a ModelInferResponse protobuf"
    return Outcome(status, message, None, e2e, [], response_id, prompt_tokens_asked, None, "none")
