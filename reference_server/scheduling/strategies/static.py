"""`static`: wait for `batch_size` queued requests or `batch_timeout_ms`, then run the batch out."""

from __future__ import annotations

from reference_server.scheduling.strategies.run_to_completion import RunToCompletionScheduler


class StaticBatchScheduler(RunToCompletionScheduler):
    name = "static"

    def launch_size(self, now: float) -> int | None:
        if not self.waiting:
            return None
        if len(self.waiting) >= self.config.batch_size or now >= self.launch_deadline():
            return min(len(self.waiting), self.config.batch_size)
        return None

    def launch_deadline(self) -> float:
        return self.waiting[0].arrival_time + self.config.batch_timeout_s
