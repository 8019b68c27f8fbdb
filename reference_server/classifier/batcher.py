"""Triton-style dynamic batcher for the classifier, on the event loop.

Requests (each [rows, F]) queue in arrival order. The batching decision is the same
pure rule the `dynamic` LLM strategy uses, `schedulers.dynamic.dynamic_batch_size`,
counted in rows as Triton does: launch `max_batch_size` rows at once, else the largest
reachable preferred size, else whatever waits once the oldest request has waited
`max_queue_delay`. Whole requests are taken from the front while they fit. With
batching off (Triton's model without `dynamic_batching`), each request runs alone.

`instances` model instances (Triton's instance_group count) serve the one queue: a batch
forms only when an instance is free, and each instance runs its forward pass on a worker
thread of its own, so the event loop never waits on the model and up to `instances`
batches run at once; requests that arrive meanwhile form the next batch.

Each request's time is split as Triton's metrics split it: queue (enqueued until its batch
launched), compute input (the batch's rows stacked), compute infer (the forward pass) and
compute output (the batch's result handed back), each batch's time charged to every request
in it (`BatchTiming`).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from engine_core.scheduling.strategies.dynamic import dynamic_batch_size

MIN_WAIT_S = 50e-6   # floor for a timed wait, so a delay rounding to 0 cannot spin


@dataclass(frozen=True)
class BatchTiming:
    """One request's share of the server's time, in seconds (Triton's queue and compute durations)."""

    queue_s: float
    compute_input_s: float
    compute_infer_s: float
    compute_output_s: float
    batch_rows: int


@dataclass
class _Pending:
    rows: Sequence              # n rows: [n, F] features, or n token-id arrays
    future: asyncio.Future      # -> ([n, C], BatchTiming)
    enqueued_s: float
    on_launch: Callable[[], None] | None = field(default=None)


class DynamicBatcher:
    """`await batcher.infer(rows)` returns (`run_batch(rows)`, its `BatchTiming`), computed inside a larger batch.

    Args:
        run_batch: [B, F] -> [B, C], called on a worker thread (one per instance).
        stack: joins the batch's requests' rows into run_batch's input (default np.concatenate:
            feature rows); the embedding model's rows are token-id arrays of their own lengths.
        max_batch_size, preferred_batch_sizes, max_queue_delay_s: Triton's dynamic batcher settings.
        dynamic_batching: False runs every request alone, as Triton does without a dynamic batcher.
        instances: model instances serving the queue in parallel.
        on_batch: called with each launched batch's row count and every request's `BatchTiming`
            (metrics), on the event loop.
    """

    def __init__(self, run_batch: Callable[[np.ndarray], np.ndarray], *, max_batch_size: int,
                 preferred_batch_sizes: tuple[int, ...] = (), max_queue_delay_s: float = 0.0,
                 dynamic_batching: bool = True, instances: int = 1,
                 on_batch: Callable[[int, list[BatchTiming]], None] | None = None,
                 stack: Callable[[list[Sequence]], Sequence] = np.concatenate) -> None:
        self._run_batch = run_batch
        self._stack = stack
        self.max_batch_size = max_batch_size
        self.preferred_batch_sizes = tuple(preferred_batch_sizes)
        self.max_queue_delay_s = max_queue_delay_s
        self.dynamic_batching = dynamic_batching
        self.instances = instances
        self._on_batch = on_batch
        self._pending: deque[_Pending] = deque()
        self._wakeup = asyncio.Event()
        self._free: asyncio.Semaphore | None = None
        self._executor = ThreadPoolExecutor(max_workers=instances, thread_name_prefix="classifier")
        self._task: asyncio.Task | None = None
        self._running: set[asyncio.Task] = set()
        self.batch_sizes: list[int] = []   # rows per launched batch, in order (tests, benchmarks)

    @property
    def num_waiting(self) -> int:
        return len(self._pending)

    def start(self) -> None:
        self._free = asyncio.Semaphore(self.instances)
        self._task = asyncio.get_running_loop().create_task(self._batch_loop(), name="classifier-batcher")

    async def stop(self) -> None:
        for task in [self._task, *self._running]:
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def infer(self, rows: Sequence,
                    on_launch: Callable[[], None] | None = None) -> tuple[np.ndarray, BatchTiming]:
        """`run_batch`'s output for `rows` (1 <= n <= max_batch_size of them) and the time they took."""
        if getattr(rows, "ndim", 2) != 2 or not 1 <= len(rows) <= self.max_batch_size:
            raise ValueError(f"a request must carry 1..{self.max_batch_size} rows, got {len(rows)}")
        future = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(rows, future, time.monotonic(), on_launch))
        self._wakeup.set()
        return await future

    async def _batch_loop(self) -> None:
        while True:
            await self._free.acquire()          # a batch forms only for a free instance
            try:
                batch = await self._next_batch()
            except BaseException:
                self._free.release()
                raise
            task = asyncio.get_running_loop().create_task(self._run(batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _next_batch(self) -> list[_Pending]:
        while True:
            while self._pending and self._pending[0].future.cancelled():
                self._pending.popleft()   # its client went away while waiting
            if not self._pending:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            if not self.dynamic_batching:
                return [self._pending.popleft()]
            oldest_wait_s = time.monotonic() - self._pending[0].enqueued_s
            rows_waiting = sum(len(p.rows) for p in self._pending if not p.future.cancelled())
            launch_rows = dynamic_batch_size(
                rows_waiting, oldest_wait_s, max_batch_size=self.max_batch_size,
                preferred_batch_sizes=self.preferred_batch_sizes, max_queue_delay_s=self.max_queue_delay_s)
            if launch_rows is None:
                self._wakeup.clear()
                timeout = max(self.max_queue_delay_s - oldest_wait_s, MIN_WAIT_S)
                try:
                    await asyncio.wait_for(self._wakeup.wait(), timeout)
                except TimeoutError:
                    pass
                continue
            batch = self._take(launch_rows)
            if batch:
                return batch

    def _take(self, launch_rows: int) -> list[_Pending]:
        """Whole requests from the front, while their rows fit in `launch_rows` (at least one)."""
        batch, rows = [], 0
        while self._pending:
            head = self._pending[0]
            if head.future.cancelled():
                self._pending.popleft()
                continue
            if batch and rows + len(head.rows) > launch_rows:
                break
            batch.append(self._pending.popleft())
            rows += len(head.rows)
        return batch

    async def _run(self, batch: list[_Pending]) -> None:
        try:
            launched = time.monotonic()
            for item in batch:
                if item.on_launch is not None:
                    item.on_launch()
            stacked = self._stack([item.rows for item in batch])   # sum n rows
            stacked_at = time.monotonic()
            self.batch_sizes.append(len(stacked))
            try:
                probs, infer_s = await asyncio.get_running_loop().run_in_executor(
                    self._executor, self._timed_forward, stacked)
            except Exception as exc:
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(exc)
                return
            output_from = time.monotonic()
            results, start = [], 0
            for item in batch:
                n = len(item.rows)
                results.append(probs[start:start + n])
                start += n
            output_s = time.monotonic() - output_from
            timings = [BatchTiming(launched - item.enqueued_s, stacked_at - launched, infer_s, output_s,
                                   len(stacked)) for item in batch]
            for item, result, timing in zip(batch, results, timings):
                if not item.future.done():
                    item.future.set_result((result, timing))
            if self._on_batch is not None:
                self._on_batch(len(stacked), timings)
        finally:
            self._free.release()

    def _timed_forward(self, stacked: np.ndarray) -> tuple[np.ndarray, float]:
        started = time.perf_counter()
        probs = self._run_batch(stacked)
        return probs, time.perf_counter() - started
