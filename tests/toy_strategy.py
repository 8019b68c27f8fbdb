"""A fifth batching strategy that only the tests register: the proof that a strategy is one file
(this one) plus one registry line (here `register(STRATEGY)` in a test, or this module's name in
SERVECAP_STRATEGY_MODULES for a server subprocess).

`lockstep`: whenever nothing runs, launch up to `lockstep_size` waiting requests together (no
waiting for more) and run them to completion.
"""

from __future__ import annotations

from dataclasses import dataclass

from contract.checks import positive_int
from engine_core.scheduling.strategies.base import Strategy
from engine_core.scheduling.strategies.limits import Limits, limit
from engine_core.scheduling.strategies.run_to_completion import RunToCompletionScheduler


@dataclass(frozen=True)
class LockstepLimits(Limits):
    lockstep_size: int = limit(2, "requests launched together")

    def __post_init__(self) -> None:
        positive_int("lockstep_size", self.lockstep_size)

    @property
    def max_running(self) -> int:
        return self.lockstep_size


class LockstepScheduler(RunToCompletionScheduler):
    limits: LockstepLimits

    def launch_size(self, now: float) -> int | None:
        return min(len(self.waiting), self.limits.lockstep_size) if self.waiting else None

    def launch_deadline(self) -> float:
        return self.waiting[0].arrival_time


STRATEGY = Strategy("lockstep", LockstepLimits, LockstepScheduler, "toy: launch up to lockstep_size at once")
