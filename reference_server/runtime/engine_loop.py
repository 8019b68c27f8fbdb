"""The engine's driving loop, independent of where it runs (a thread or its own process).

    commands in                      EngineLoop                         items out
    -----------                      ----------                         ---------
    AddRequest / AbortRequest  ->    apply, then step() while there  ->  publish([(request_id, item), ...],
    (next_commands(timeout))         is runnable work, else sleep        stats, new_tokens, did_work)

`next_commands(timeout_s)` returns the commands that arrived (waiting up to `timeout_s`,
None = until one arrives, 0 = not at all), or None to stop the loop. `publish` gets, once
per step, every item of that step in order: `ACCEPTED` or the exception that rejected an
`AddRequest`, the step's `StepOutput`s, or an `EngineFailure` for each live request when a
step raised. Aborted requests get nothing more. The engine is single-threaded by contract:
only this loop touches it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from reference_server.runtime.stream_interval import StreamInterval

logger = logging.getLogger("reference_server.runtime.engine_loop")

ACCEPTED = "accepted"   # item: the engine took the request


class EngineFailure(Exception):
    """The engine raised while stepping (or its process died); every in-flight request gets this."""


@dataclass(frozen=True)
class AddRequest:
    request_id: str
    prompt_token_ids: list[int]
    params: object   # SamplingParams
    submitted_at: float | None = None   # unix s the serving process handed it over (the engine record's arrival)
    lora: str | None = None             # the LoRA adapter it runs with (None: the base model)


@dataclass(frozen=True)
class AbortRequest:
    request_id: str


@dataclass(frozen=True)
class SlowDown:
    """A fault: every step that starts in [start_unix, end_unix) takes `factor` times as long."""
    factor: float
    start_unix: float
    end_unix: float


def describe_start_failure(exc: Exception) -> str:
    """A bad configuration (ValueError) is said as is; anything else is a bug: name its type."""
    return str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"


Items = list[tuple[str, object]]   # (request_id, ACCEPTED | StepOutput | Exception)
Publish = Callable[[Items, object, int, bool], None]   # (items, EngineStats, new tokens, did work)


class EngineLoop:
    """Args:
        engine: a built, warmed-up `Engine`.
        next_commands: see the module docstring.
        publish: see the module docstring; called after every step that ran or command batch.
        idle_poll_s: longest sleep while requests are unfinished but step() did nothing
            (e.g. all KV blocks taken), so the loop never spins.
    """

    def __init__(self, engine, next_commands: Callable[[float | None], list | None], publish: Publish,
                 *, idle_poll_s: float = 0.005, stream_interval: int = 1) -> None:
        self.engine = engine
        self._chunks = StreamInterval(stream_interval)
        self._next_commands = next_commands
        self._publish = publish
        self._idle_poll_s = idle_poll_s
        self._live: set[str] = set()   # requests accepted and not yet finished or aborted

    def run(self) -> None:
        """Until `next_commands` returns None."""
        stalled = False
        while True:
            commands = self._next_commands(self._wait_s(stalled))
            if commands is None:
                return
            items: Items = []
            stalled = False
            try:
                for command in commands:
                    self._apply(command, items)
                if self._runnable():
                    stalled = not self._step(items)
                elif commands:
                    # acceptances, or the last request aborted: publish them (and the freed blocks) now
                    self._publish(items, self.engine.stats(), 0, False)
            except Exception as exc:   # an engine bug must not kill the loop (and hang every client)
                self._fail_all(exc, items)

    def _wait_s(self, stalled: bool) -> float | None:
        """How long to wait for commands: forever when idle, until a forming static/dynamic
        batch may launch, a short poll when the last step could not run, else not at all."""
        if not self.engine.has_unfinished_requests():
            return None
        wait_s = self.engine.seconds_until_schedulable()
        if wait_s is not None and wait_s > 0:
            return wait_s
        return self._idle_poll_s if stalled else 0.0

    def _runnable(self) -> bool:
        if not self.engine.has_unfinished_requests():
            return False
        wait_s = self.engine.seconds_until_schedulable()
        return wait_s is None or wait_s <= 0

    def _apply(self, command, items: Items) -> None:
        if isinstance(command, SlowDown):
            self.engine.slow_down(command.factor, command.start_unix, command.end_unix)
            return
        if isinstance(command, AbortRequest):
            self.engine.abort_request(command.request_id)
            self._live.discard(command.request_id)
            self._chunks.forget(command.request_id)
            return
        try:
            self.engine.add_request(command.request_id, command.prompt_token_ids, command.params,
                                    submitted_at=command.submitted_at, lora=command.lora)
        except Exception as exc:   # RequestRejected (a ValueError) or a bad argument
            items.append((command.request_id, exc))
            return
        self._live.add(command.request_id)
        items.append((command.request_id, ACCEPTED))

    def _step(self, items: Items) -> bool:
        """One engine step; publishes its outputs with `items`. False when nothing could run."""
        outputs = self.engine.step()
        new_tokens = 0
        for output in outputs:
            new_tokens += len(output.new_token_ids)
            if output.request_id not in self._live:
                continue   # aborted meanwhile
            if output.finished:
                self._live.discard(output.request_id)
            chunk = self._chunks.take(output)
            if chunk is not None:
                items.append((output.request_id, chunk))
        self._publish(items, self.engine.stats(), new_tokens, bool(outputs))
        return bool(outputs)

    def _fail_all(self, exc: Exception, items: Items) -> None:
        """Give every in-flight request an EngineFailure and drop it from the engine."""
        logger.error("engine failed; failing %d in-flight requests", len(self._live), exc_info=exc)
        failure = EngineFailure(f"engine failed: {type(exc).__name__}: {exc}")
        for request_id in sorted(self._live):
            try:
                self.engine.abort_request(request_id)
            except Exception:
                logger.exception("abort of %s failed too", request_id)
            items.append((request_id, failure))
        self._live.clear()
        try:
            stats = self.engine.stats()
        except Exception:
            stats = None
        self._publish(items, stats, 0, False)
