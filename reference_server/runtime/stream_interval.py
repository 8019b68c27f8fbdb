"""Several tokens per stream chunk: vLLM's `--stream-interval N`.

A request's first token goes out at once (time to first token is unchanged), then its tokens are held
until N have gathered, and whatever is held goes out with the step that finishes the request. Each
chunk then carries up to N tokens, so the front end and the client frame, send and parse N times fewer
chunks: at high concurrency their per-chunk work, not the engine, is what limits a replica. N = 1
passes every step's output through unchanged.
"""

from __future__ import annotations

from dataclasses import replace


class StreamInterval:
    """Coalesce a request's step outputs (`StepOutput`: new_token_ids, finished) into chunks of N tokens."""

    def __init__(self, interval: int = 1) -> None:
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise ValueError(f"stream_interval must be an integer >= 1, got {interval!r}")
        self.interval = interval
        self._held: dict[str, list[int]] = {}   # request id -> tokens not yet sent
        self._sent_first: set[str] = set()

    def take(self, output):
        """The output to send now (its new_token_ids the held tokens and this step's), or None to hold it."""
        if self.interval == 1:
            return output
        request_id = output.request_id
        tokens = [t for t in output.new_token_ids if t is not None]
        if output.finished:
            held = self._held.pop(request_id, [])
            self._sent_first.discard(request_id)
            return replace(output, new_token_ids=held + tokens) if held else output
        if not tokens:
            return output if request_id not in self._held else None   # a prefill chunk: nothing to hold
        if request_id not in self._sent_first:
            self._sent_first.add(request_id)
            return output
        held = self._held.setdefault(request_id, [])
        held.extend(tokens)
        if len(held) < self.interval:
            return None
        del self._held[request_id]
        return replace(output, new_token_ids=held)

    def forget(self, request_id: str) -> None:
        """An aborted request: drop what is held for it."""
        self._held.pop(request_id, None)
        self._sent_first.discard(request_id)
