"""`dynamic`: Triton's dynamic batcher forms the batch, which then runs to completion."""

from __future__ import annotations

from dataclasses import dataclass

from contract.checks import non_negative_int, positive_int
from engine_core.scheduling.strategies.base import Strategy
from engine_core.scheduling.strategies.limits import Limits, limit, parse_int_list
from engine_core.scheduling.strategies.run_to_completion import CLOCK_EPSILON_S, RunToCompletionScheduler


@dataclass(frozen=True)
class DynamicLimits(Limits):
    """Triton's dynamic batcher: `max_batch_size`, `preferred_batch_sizes` (kept sorted, unique), `max_queue_delay_us`."""

    max_batch_size: int = limit(8, "largest batch")
    preferred_batch_sizes: tuple[int, ...] = limit((), "e.g. 4,8", parse=parse_int_list)
    max_queue_delay_us: int = limit(1000, "longest wait for a batch")

    def __post_init__(self) -> None:
        positive_int("max_batch_size", self.max_batch_size)
        non_negative_int("max_queue_delay_us", self.max_queue_delay_us)
        if not isinstance(self.preferred_batch_sizes, (tuple, list)):
            raise ValueError(f"preferred_batch_sizes must be a list of positive integers, got {self.preferred_batch_sizes!r}")
        sizes = tuple(self.preferred_batch_sizes)
        for size in sizes:
            positive_int("preferred_batch_sizes", size)
            if size > self.max_batch_size:
                raise ValueError(f"preferred_batch_sizes entry {size} exceeds max_batch_size ({self.max_batch_size})")
        object.__setattr__(self, "preferred_batch_sizes", tuple(sorted(set(sizes))))

    @property
    def max_queue_delay_s(self) -> float:
        return self.max_queue_delay_us / 1e6

    @property
    def max_running(self) -> int:
        return self.max_batch_size


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
    limits: DynamicLimits

    def launch_size(self, now: float) -> int | None:
        return dynamic_batch_size(
            len(self.waiting), now - self.waiting[0].arrival_time if self.waiting else 0.0,
            max_batch_size=self.limits.max_batch_size,
            preferred_batch_sizes=self.limits.preferred_batch_sizes,
            max_queue_delay_s=self.limits.max_queue_delay_s,
        )

    def launch_deadline(self) -> float:
        return self.waiting[0].arrival_time + self.limits.max_queue_delay_s


STRATEGY = Strategy("dynamic", DynamicLimits, DynamicBatchScheduler, "Triton's dynamic batcher, run to completion")
