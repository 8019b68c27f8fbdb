"""One generation request from admission to its last token, as a stream of text deltas.

Shared by /v1/completions and /v1/chat/completions: admission (429/503), handing the
request to the engine (400 when the engine rejects it), the output text (`output_text.py`:
UTF-8 decoding, special tokens, the stop token, stop strings), usage, TTFT/e2e metrics,
and aborting the sequence whenever the consumer goes away before the end (client
disconnect, drain timeout), so its KV blocks are freed within one engine step.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from reference_server.api.errors import APIError
from reference_server.api.output_text import OutputText
from reference_server.runtime.engine_client import RequestAborted
from reference_server.runtime.engine_loop import ACCEPTED, EngineFailure


@dataclass
class Delta:
    """New text since the previous delta (may be '' for a token that completes no character
    or is held back while it might start a stop string); counts are cumulative."""

    text: str
    num_new_tokens: int
    finish_reason: str | None     # "stop" | "length" | None
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    token_ids: tuple[int, ...] = ()   # the ids generated since the previous delta
    kv_transfer_params: dict | None = None   # a prefill for a decode worker: its KV's blocks (the last delta)


class Generation:
    """Use `await Generation.open(...)`, then iterate `deltas()` exactly once."""

    def __init__(self, runtime, request_id: str, queue: asyncio.Queue, ticket, text: OutputText,
                 arrival_s: float, num_prompt_tokens: int) -> None:
        self.runtime = runtime
        self.request_id = request_id
        self._queue = queue
        self._ticket = ticket
        self._text = text
        self._arrival_s = arrival_s
        self._finished = False
        self._closed = False
        self.prompt_tokens = num_prompt_tokens
        self.completion_tokens = 0
        self.cached_prompt_tokens = 0

    @classmethod
    async def open(cls, runtime, request_id: str, prompt_token_ids: list[int], params,
                   text: OutputText, arrival_s: float, lora: str | None = None) -> Generation:
        """Admit and enqueue; returns once the engine accepted the request, else raises APIError.
        `text` turns the generated ids into the response's text (a fresh one per request)."""
        ticket = runtime.admission.admit()
        queue = runtime.engine.add_request(request_id, prompt_token_ids, params, lora=lora)
        try:
            first = await queue.get()
        except BaseException:   # client gone while the engine was busy
            runtime.engine.abort(request_id)
            ticket.release()
            raise
        if first != ACCEPTED:   # a string that crossed the engine pipe: compare by value
            ticket.release()
            if isinstance(first, ValueError):   # RequestRejected subclasses ValueError
                raise APIError(400, str(first), code="request_rejected")
            raise APIError(500, f"engine error: {first}")
        runtime.metrics.prompt_tokens.inc(len(prompt_token_ids))
        generation = cls(runtime, request_id, queue, ticket, text, arrival_s, len(prompt_token_ids))
        runtime.live[request_id] = generation
        return generation

    async def deltas(self) -> AsyncIterator[Delta]:
        metrics = self.runtime.metrics
        try:
            while True:
                item = await self._queue.get()
                if isinstance(item, RequestAborted):
                    raise APIError(503, "request aborted: the server is shutting down", code="aborted")
                if isinstance(item, EngineFailure):
                    raise APIError(500, str(item), code="engine_failure")
                if not item.new_token_ids and not item.finished:
                    continue   # e.g. a chunk of a long prompt's prefill: nothing to send yet
                if self.completion_tokens == 0 and item.new_token_ids:
                    self._ticket.started()
                    metrics.time_to_first_token.observe(time.monotonic() - self._arrival_s)
                self.prompt_tokens = item.num_prompt_tokens
                self.completion_tokens = item.num_output_tokens
                self.cached_prompt_tokens = item.num_cached_prompt_tokens
                finish_reason = item.finish_reason if item.finished else None
                # the engine's "stop": end-of-sequence or a stop token, the last id of this output
                text = self._text.feed(item.new_token_ids, ends_on_stop_token=finish_reason == "stop")
                new_ids = tuple(item.new_token_ids)
                if self._text.stopped:
                    finish_reason = "stop"
                    self.runtime.engine.abort(self.request_id)   # a stop string ends it early
                    # the ids after the one that completed it were never output: not in usage either
                    self.completion_tokens -= len(new_ids) - self._text.ids_used
                    new_ids = new_ids[:self._text.ids_used]
                elif item.finished:
                    text += self._text.finish()
                    if self._text.stopped:
                        finish_reason = "stop"
                if finish_reason is not None:
                    self._finished = True
                    metrics.requests_finished.labels(finish_reason=finish_reason).inc()
                    metrics.e2e_latency.observe(time.monotonic() - self._arrival_s)
                    metrics.observe_request(item.timings)
                yield Delta(text, len(new_ids), finish_reason, self.prompt_tokens,
                            self.completion_tokens, self.cached_prompt_tokens, new_ids,
                            getattr(item, "kv_transfer_params", None))
                if finish_reason is not None:
                    return
        finally:
            self.close()

    def close(self) -> None:
        """Idempotent cleanup: abort the sequence if unfinished (frees its KV blocks within one
        step), release the admission ticket. Also run as the response's background task, which
        covers a client that leaves before the stream's first iteration."""
        if self._closed:
            return
        self._closed = True
        self.runtime.live.pop(self.request_id, None)
        if not self._finished:   # consumer gone (disconnect) or failure
            self.runtime.engine.abort(self.request_id)
            self.runtime.metrics.requests_finished.labels(finish_reason="abort").inc()
        self._ticket.release()

    def abort_from_server(self) -> None:
        """Drain grace over: end this request's stream with RequestAborted."""
        if not self._finished:
            self.runtime.engine.abort(self.request_id, self._queue)
