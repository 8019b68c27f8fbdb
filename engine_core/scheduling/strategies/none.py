"""`none`: one request at a time, start to finish (the baseline every batching gain is measured against)."""

from __future__ import annotations

from dataclasses import dataclass

from engine_core.scheduling.strategies.base import Strategy
from engine_core.scheduling.strategies.limits import Limits
from engine_core.scheduling.strategies.run_to_completion import RunToCompletionScheduler


@dataclass(frozen=True)
class NoBatchingLimits(Limits):
    """No limits to set: the batch is always one request."""

    @property
    def max_running(self) -> int:
        return 1


class NoBatchingScheduler(RunToCompletionScheduler):
    limits: NoBatchingLimits

    def launch_size(self, now: float) -> int | None:
        return 1 if self.waiting else None

    def launch_deadline(self) -> float:
        return self.waiting[0].arrival_time


STRATEGY = Strategy("none", NoBatchingLimits, NoBatchingScheduler, "one request at a time")
