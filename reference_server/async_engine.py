"""The engine thread: runs `Engine.step()` off the event loop and streams outputs back.

    event loop                         engine thread
    ----------                         -------------
    add_request() -> asyncio.Queue  -> commands deque (under a Condition) -> engine.add_request
    abort()                         -> commands deque                    -> engine.abort_request
    queue.get()  <- call_soon_threadsafe(queue.put_nowait, item)  <- engine.step() outputs

The engine is only ever touched by its own thread (it is single-threaded by contract).
Streaming a token to a client never waits on the model: the thread hands each
`StepOutput` to the loop and goes on with the next step. When there is nothing to do
the thread sleeps on the condition, with timeout `engine.seconds_until_schedulable()`
while a static/dynamic batch is forming, and wakes at once when a command arrives.

Items a request's queue receives, in order: `ACCEPTED` (or the exception that
rejected it, e.g. `RequestRejected`), then `StepOutput`s until one has
`finished=True`, or an `EngineFailure`/`RequestAborted` instead.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger("reference_server.async_engine")

ACCEPTED = "accepted"   # sentinel: the engine took the request


class RequestAborted(Exception):
    """The request was aborted by the server (drain grace period over)."""


class EngineFailure(Exception):
    """The engine raised while stepping; every in-flight request gets this."""


@dataclass
class _Add:
    request_id: str
    prompt_token_ids: list[int]
    params: object   # SamplingParams
    queue: asyncio.Queue


@dataclass
class _Abort:
    request_id: str


class AsyncEngine:
    """Owns the engine thread. Build with a factory so the model loads on that thread.

    Args:
        build_engine: returns a ready-to-warm `Engine` (called on the engine thread).
        metrics: a `ServerMetrics`, updated after every step (optional).
        idle_poll_s: longest sleep while requests are unfinished but step() did nothing
            (e.g. all KV blocks taken), so the thread never spins.
    """

    def __init__(self, build_engine: Callable[[], object], *, metrics=None, idle_poll_s: float = 0.005) -> None:
        self._build_engine = build_engine
        self._metrics = metrics
        self._idle_poll_s = idle_poll_s
        self._cond = threading.Condition()
        self._commands: deque[_Add | _Abort] = deque()
        self._queues: dict[str, asyncio.Queue] = {}   # engine-thread side: live requests
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.ready = threading.Event()     # set after build + warm-up
        self.failed: str | None = None     # why the engine could not start, if it could not
        self.engine = None                 # read-only from other threads (describe, tokenizer)
        self.description: dict = {}

    # --- event-loop side -------------------------------------------------------------
    def start(self) -> None:
        """Start the engine thread; call from the running event loop."""
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="engine", daemon=True)
        self._thread.start()

    def add_request(self, request_id: str, prompt_token_ids: list[int], params) -> asyncio.Queue:
        """Queue a request for the engine; returns the queue its outputs will arrive on."""
        queue: asyncio.Queue = asyncio.Queue()
        with self._cond:
            self._commands.append(_Add(request_id, list(prompt_token_ids), params, queue))
            self._cond.notify()
        return queue

    def abort(self, request_id: str, queue: asyncio.Queue | None = None) -> None:
        """Abort a request (client gone, or drain over); its KV blocks are freed next step."""
        with self._cond:
            self._commands.append(_Abort(request_id))
            self._cond.notify()
        if queue is not None:
            queue.put_nowait(RequestAborted(f"request {request_id} aborted"))

    async def wait_ready(self, poll_s: float = 0.02) -> None:
        while not self.ready.is_set():
            if self.failed:
                raise RuntimeError(self.failed)
            await asyncio.sleep(poll_s)

    def stop(self, timeout_s: float = 5.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout_s)

    # --- engine thread ---------------------------------------------------------------
    def _run(self) -> None:
        try:
            engine = self._build_engine()
            engine.warmup()
            self.description = engine.describe()
            self.engine = engine
        except Exception as exc:  # the process reports it and exits; never a silent hang
            logger.exception("engine failed to start")
            self.failed = f"engine failed to start: {type(exc).__name__}: {exc}"
            return
        if self._metrics is not None:
            self._metrics.set_engine_description(self.description)
        self.ready.set()
        while True:
            commands = self._next_commands(engine)
            if commands is None:
                return
            try:
                for command in commands:
                    self._apply(engine, command)
                if engine.has_unfinished_requests():
                    wait_s = engine.seconds_until_schedulable()
                    if wait_s is None or wait_s <= 0:
                        self._step(engine)
                    # else: a batch is still forming; _next_commands sleeps until it may launch
                elif commands and self._metrics is not None:
                    # e.g. the last request was aborted: publish the freed KV blocks now
                    self._metrics.observe_step(engine.stats(), 0, did_work=False)
            except Exception as exc:   # an engine bug must not kill the thread (and hang every client)
                self._fail_all(engine, exc)

    def _next_commands(self, engine) -> list | None:
        """Block until there are commands or work to do; None once stopping."""
        with self._cond:
            while not self._stopping and not self._commands:
                if not engine.has_unfinished_requests():
                    self._cond.wait()
                    continue
                wait_s = engine.seconds_until_schedulable()
                if wait_s is not None and wait_s > 0:
                    # a batch is forming (static/dynamic): sleep until it may launch
                    self._cond.wait(timeout=wait_s)
                break   # runnable now (or the batch timeout is over)
            if self._stopping:
                return None
            commands = list(self._commands)
            self._commands.clear()
            return commands

    def _apply(self, engine, command) -> None:
        if isinstance(command, _Abort):
            engine.abort_request(command.request_id)
            self._queues.pop(command.request_id, None)
            return
        try:
            engine.add_request(command.request_id, command.prompt_token_ids, command.params)
        except Exception as exc:   # RequestRejected (a ValueError) or a bad argument
            self._send(command.queue, exc)
            return
        self._queues[command.request_id] = command.queue
        self._send(command.queue, ACCEPTED)

    def _step(self, engine) -> None:
        try:
            outputs = engine.step()
        except Exception as exc:
            self._fail_all(engine, exc)
            return
        new_tokens = 0
        for output in outputs:
            new_tokens += len(output.new_token_ids)
            queue = self._queues.get(output.request_id)
            if queue is None:
                continue   # aborted meanwhile
            if output.finished:
                del self._queues[output.request_id]
            self._send(queue, output)
        if self._metrics is not None:
            self._metrics.observe_step(engine.stats(), new_tokens, did_work=bool(outputs))
        if not outputs:
            # nothing could run (e.g. no free KV block and nothing to preempt): don't spin,
            # but wake at once for a new command (an abort may be what frees the blocks)
            with self._cond:
                if not self._commands:
                    self._cond.wait(timeout=self._idle_poll_s)

    def _fail_all(self, engine, exc: Exception) -> None:
        """Give every in-flight request an EngineFailure and drop it from the engine."""
        logger.exception("engine failed; failing %d in-flight requests", len(self._queues))
        failure = EngineFailure(f"engine failed: {type(exc).__name__}: {exc}")
        for request_id, queue in list(self._queues.items()):
            try:
                engine.abort_request(request_id)
            except Exception:
                logger.exception("abort of %s failed too", request_id)
            self._send(queue, failure)
        self._queues.clear()

    def _send(self, queue: asyncio.Queue, item) -> None:
        try:
            self._loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:
            pass   # event loop closed during shutdown: nobody is listening any more
