"""`none`: one request at a time, start to finish (the baseline every batching gain is measured against)."""

from __future__ import annotations

from reference_server.scheduling.strategies.run_to_completion import RunToCompletionScheduler


class NoBatchingScheduler(RunToCompletionScheduler):
    name = "none"

    def launch_size(self, now: float) -> int | None:
        return 1 if self.waiting else None

    def launch_deadline(self) -> float:
        return self.waiting[0].arrival_time
