"""`static`: wait for `batch_size` queued requests or `batch_timeout_ms`, then run the batch out."""

from __future__ import annotations

from dataclasses import dataclass

from contract.checks import positive_int
from engine_core.scheduling.strategies.base import Strategy
from engine_core.scheduling.strategies.limits import Limits, check_non_negative_number, limit
from engine_core.scheduling.strategies.run_to_completion import CLOCK_EPSILON_S, RunToCompletionScheduler


@dataclass(frozen=True)
class StaticLimits(Limits):
    """Launch at `batch_size` queued requests, or when the oldest has waited `batch_timeout_ms`."""

    batch_size: int = limit(8, "batch size")
    batch_timeout_ms: float = limit(50.0, "launch a partial batch after")

    def __post_init__(self) -> None:
        positive_int("batch_size", self.batch_size)
        check_non_negative_number("batch_timeout_ms", self.batch_timeout_ms)

    @property
    def batch_timeout_s(self) -> float:
        return self.batch_timeout_ms / 1e3

    @property
    def max_running(self) -> int:
        return self.batch_size


class StaticBatchScheduler(RunToCompletionScheduler):
    limits: StaticLimits

    def launch_size(self, now: float) -> int | None:
        if not self.waiting:
            return None
        if len(self.waiting) >= self.limits.batch_size or now + CLOCK_EPSILON_S >= self.launch_deadline():
            return min(len(self.waiting), self.limits.batch_size)
        return None

    def launch_deadline(self) -> float:
        return self.waiting[0].arrival_time + self.limits.batch_timeout_s


STRATEGY = Strategy("static", StaticLimits, StaticBatchScheduler, "fixed-size batches with a timeout, run to completion")
