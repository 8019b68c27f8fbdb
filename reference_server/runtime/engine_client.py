"""The event-loop side of the engine: one asyncio.Queue per request, fed from `EngineLoop` items.

`AsyncEngine` (engine on a thread of this process) and `EngineProcess` (engine in a child
process) differ only in how commands reach the loop and how items come back; both hand
the event loop one batch of items per engine step (`_dispatch`, run on the loop).

Items a request's queue receives, in order: `ACCEPTED` (or the exception that rejected
it, e.g. `RequestRejected`), then `StepOutput`s until one has `finished=True`, or an
`EngineFailure`/`RequestAborted` instead.
"""

from __future__ import annotations

import asyncio
import threading
import time

from reference_server.runtime.engine_loop import AbortRequest, AddRequest, Items, SlowDown


class RequestAborted(Exception):
    """The request was aborted by the server (drain grace period over)."""


class EngineClient:
    """Subclasses implement `start()`, `stop()` and `_submit(command)` (thread-safe, never blocks
    the event loop), and call `_deliver(items)` from any thread, `_set_ready(description)`
    once the engine is warm, `_set_failed(message)` when it cannot serve."""

    def __init__(self, metrics=None, record_log=None) -> None:
        self._metrics = metrics
        self._record_log = record_log   # an EngineRecordLog: each step's records go there
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queues: dict[str, asyncio.Queue] = {}   # live requests; touched on the event loop only
        self.ready = threading.Event()     # set after build + warm-up
        self.failed: str | None = None     # why the engine cannot serve, if it cannot
        self.description: dict = {}

    # --- event-loop side -------------------------------------------------------------
    def add_request(self, request_id: str, prompt_token_ids: list[int], params,
                    lora: str | None = None) -> asyncio.Queue:
        """Queue a request for the engine (`lora`: its adapter); returns the queue its outputs will arrive on."""
        queue: asyncio.Queue = asyncio.Queue()
        self._queues[request_id] = queue
        self._submit(AddRequest(request_id, list(prompt_token_ids), params, submitted_at=time.time(), lora=lora))
        return queue

    def abort(self, request_id: str, queue: asyncio.Queue | None = None) -> None:
        """Abort a request (client gone, or drain over); its KV blocks are freed next step."""
        self._queues.pop(request_id, None)
        self._submit(AbortRequest(request_id))
        if queue is not None:
            queue.put_nowait(RequestAborted(f"request {request_id} aborted"))

    def slow_down(self, factor: float, start_unix: float, end_unix: float) -> None:
        """A fault: the engine's steps in that window take `factor` times as long."""
        self._submit(SlowDown(factor, start_unix, end_unix))

    async def wait_ready(self, poll_s: float = 0.02) -> None:
        while not self.ready.is_set():
            if self.failed:
                raise RuntimeError(self.failed)
            await asyncio.sleep(poll_s)

    def _dispatch(self, items: Items) -> None:
        for request_id, item in items:
            queue = self._queues.get(request_id)
            if queue is None:
                continue   # aborted meanwhile
            if isinstance(item, BaseException) or getattr(item, "finished", False):
                del self._queues[request_id]
            queue.put_nowait(item)

    def _fail_live(self, failure: Exception) -> None:
        self._dispatch([(request_id, failure) for request_id in list(self._queues)])

    # --- any thread --------------------------------------------------------------------
    def _bind_loop(self) -> None:
        """Call from the running event loop in `start()`."""
        self._loop = asyncio.get_running_loop()

    def _deliver(self, items: Items, stats=None, new_tokens: int = 0, did_work: bool = False) -> None:
        """One step's items and the engine's stats after it: metrics here, queues on the loop."""
        if self._metrics is not None and stats is not None:
            self._metrics.observe_step(stats, new_tokens, did_work=did_work)
        if self._record_log is not None and stats is not None:
            self._record_log.add(getattr(stats, "records", None))
        if items:
            self._call_on_loop(self._dispatch, items)

    def _call_on_loop(self, fn, *args) -> None:
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass   # event loop closed during shutdown: nobody is listening any more

    def _set_ready(self, description: dict) -> None:
        self.description = description
        if self._metrics is not None:
            self._metrics.set_engine_description(description)
        self.ready.set()

    def _set_failed(self, message: str) -> None:
        self.failed = message
        self.ready.clear()
