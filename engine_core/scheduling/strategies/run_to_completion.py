"""Shared engine of the `none`, `static` and `dynamic` strategies: form a batch, run it out.

A batch is launched only when nothing is running. Its prompts are prefilled in one step,
then every member decodes one token per step; finished members leave at once, but nothing
new is admitted until the whole batch is done. Each member's worst case (prompt +
max_tokens) is reserved at launch, so these strategies never need to preempt.
"""

from __future__ import annotations

from abc import abstractmethod

from engine_core.scheduling.strategies.base import ScheduledBatch, Scheduler

CLOCK_EPSILON_S = 1e-9   # `now - arrival` loses bits: waking exactly at a deadline must launch


class RunToCompletionScheduler(Scheduler):
    steady_decodes = True   # while a batch runs, every step is that batch; nothing is admitted
    @abstractmethod
    def launch_size(self, now: float) -> int | None:
        """How many waiting requests to launch as a batch now, or None to keep waiting."""

    @abstractmethod
    def launch_deadline(self) -> float:
        """When the oldest waiting request forces a launch (absolute, in `now`'s clock)."""

    def schedule(self, now: float) -> ScheduledBatch | None:
        if not self.running:
            size = self.launch_size(now) if self.waiting else None
            if not size:
                return None
            self._launch(size)
        batch = ScheduledBatch()
        for seq in self.running:
            n = seq.num_uncomputed_tokens
            self.block_manager.may_append(seq, n)   # reserved at launch: cannot fail
            batch.add(seq, n)
        return batch

    def seconds_until_schedulable(self, now: float) -> float | None:
        if self.running:
            return 0.0
        if not self.waiting:
            return None
        if self.launch_size(now):
            return 0.0
        return max(0.0, self.launch_deadline() - now)

    def _launch(self, size: int) -> None:
        """Admit up to `size` waiting requests whose worst-case blocks fit together (at least one)."""
        free = self.block_manager.num_free_blocks
        reserved = 0
        for _ in range(size):
            seq = self.waiting[0]
            worst = self.block_manager.blocks_for(seq.max_total_tokens)
            if self.running and reserved + worst > free:
                break
            reserved += worst
            self._admit(self.waiting.popleft())
