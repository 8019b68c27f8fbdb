"""Triton-style dynamic batcher for the classifier, on the event loop.

Requests (each [rows, F]) queue in arrival order. The batching decision is the same
pure rule the `dynamic` LLM strategy uses, `schedulers.dynamic.dynamic_batch_size`,
counted in rows as Triton does: launch `max_batch_size` rows at once, else the largest
reachable preferred size, else whatever waits once the oldest request has waited
`max_queue_delay`. Whole requests are taken from the front while they fit. The forward
pass runs on one worker thread, so the event loop never waits on the model and one
batch runs at a time (one model instance); requests that arrive meanwhile form the
next batch.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from reference_server.scheduling.strategies.dynamic import dynamic_batch_size

MIN_WAIT_S = 50e-6   # floor for a timed wait, so a delay rounding to 0 cannot spin


@dataclass
class _Pending:
    rows: np.ndarray            # [n, F]
    future: asyncio.Future      # -> [n, C]
    enqueued_s: float
    on_launch: Callable[[], None] | None = field(default=None)


class DynamicBatcher:
    """`await batcher.infer(rows)` returns `run_batch(rows)`, computed inside a larger batch.

    Args:
        run_batch: [B, F] -> [B, C], called on the worker thread.
        max_batch_size, preferred_batch_sizes, max_queue_delay_s: Triton's dynamic batcher settings.
        metrics: a `ServerMetrics` (batch size and queue time are recorded) or None.
    """

    def __init__(self, run_batch: Callable[[np.ndarray], np.ndarray], *, max_batch_size: int,
                 preferred_batch_sizes: tuple[int, ...] = (), max_queue_delay_s: float = 0.0,
                 metrics=None) -> None:
        self._run_batch = run_batch
        self.max_batch_size = max_batch_size
        self.preferred_batch_sizes = tuple(preferred_batch_sizes)
        self.max_queue_delay_s = max_queue_delay_s
        self._metrics = metrics
        self._pending: deque[_Pending] = deque()
        self._wakeup = asyncio.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="classifier")
        self._task: asyncio.Task | None = None
        self.batch_sizes: list[int] = []   # rows per launched batch, in order (tests, benchmarks)

    @property
    def num_waiting(self) -> int:
        return len(self._pending)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._batch_loop(), name="classifier-batcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def infer(self, rows: np.ndarray, on_launch: Callable[[], None] | None = None) -> np.ndarray:
        """Probabilities for `rows` ([n, F], 1 <= n <= max_batch_size)."""
        if rows.ndim != 2 or not 1 <= rows.shape[0] <= self.max_batch_size:
            raise ValueError(f"a request must carry 1..{self.max_batch_size} rows, got shape {list(rows.shape)}")
        future = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(rows, future, time.monotonic(), on_launch))
        self._wakeup.set()
        return await future

    async def _batch_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while self._pending and self._pending[0].future.cancelled():
                self._pending.popleft()   # its client went away while waiting
            if not self._pending:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            oldest_wait_s = time.monotonic() - self._pending[0].enqueued_s
            rows_waiting = sum(p.rows.shape[0] for p in self._pending if not p.future.cancelled())
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
                await self._run(loop, batch)

    def _take(self, launch_rows: int) -> list[_Pending]:
        """Whole requests from the front, while their rows fit in `launch_rows` (at least one)."""
        batch, rows = [], 0
        while self._pending:
            head = self._pending[0]
            if head.future.cancelled():
                self._pending.popleft()
                continue
            if batch and rows + head.rows.shape[0] > launch_rows:
                break
            batch.append(self._pending.popleft())
            rows += head.rows.shape[0]
        return batch

    async def _run(self, loop: asyncio.AbstractEventLoop, batch: list[_Pending]) -> None:
        now = time.monotonic()
        for item in batch:
            if item.on_launch is not None:
                item.on_launch()
            if self._metrics is not None:
                self._metrics.classifier_queue_seconds.observe(now - item.enqueued_s)
        stacked = np.concatenate([item.rows for item in batch])   # [sum n, F]
        self.batch_sizes.append(stacked.shape[0])
        if self._metrics is not None:
            self._metrics.classifier_batch_size.observe(stacked.shape[0])
        try:
            probs = await loop.run_in_executor(self._executor, self._run_batch, stacked)
        except Exception as exc:
            for item in batch:
                if not item.future.done():
                    item.future.set_exception(exc)
            return
        start = 0
        for item in batch:
            n = item.rows.shape[0]
            if not item.future.done():
                item.future.set_result(probs[start:start + n])
            start += n
