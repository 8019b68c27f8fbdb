"""`dynamic`: Triton's dynamic batcher forms the batch, which then runs to completion."""

from __future__ import annotations

from reference_server.scheduling.strategies.run_to_completion import RunToCompletionScheduler

CLOCK_EPSILON_S = 1e-9   # `now - arrival` loses bits: waking exactly at the deadline must launch


def dynamic_batch_size(num_waiting: int, oldest_wait_s: float, *, max_batch_size: int,
                       preferred_batch_sizes: tuple[int, ...], max_queue_delay_s: float) -> int | None:
    """How many of the waiting requests to launch now, or None to keep waiting.

    Triton semantics: launch `max_batch_size` as soon as that many wait; else launch the
    largest preferred size that is reachable; else, once the oldest request has waited
    `max_queue_delay_s`, launch whatever is there (without preferred sizes or a delay that
    is simply "as many as are waiting, up to max_batch_size").
    """
    if num_waiting <= 0:
        return None
    if num_waiting >= max_batch_size:
        return max_batch_size
    reachable = [size for size in preferred_batch_sizes if size <= num_waiting]
    if reachable:
        return max(reachable)
    if oldest_wait_s + CLOCK_EPSILON_S >= max_queue_delay_s:
        return num_waiting
    return None


class DynamicBatchScheduler(RunToCompletionScheduler):
    name = "dynamic"

    def launch_size(self, now: float) -> int | None:
        return dynamic_batch_size(
            len(self.waiting), now - self.waiting[0].arrival_time if self.waiting else 0.0,
            max_batch_size=self.config.max_batch_size,
            preferred_batch_sizes=self.config.preferred_batch_sizes,
            max_queue_delay_s=self.config.max_queue_delay_s,
        )

    def launch_deadline(self) -> float:
        return self.waiting[0].arrival_time + self.config.max_queue_delay_s
