"""`continuous`: iteration-level batching (Orca/vLLM) with chunked prefill and preemption.

Every step: running sequences first (admission order), each takes its next chunk (one token
when decoding) out of `max_num_batched_tokens`; when KV blocks run out the newest running
sequence is preempted (blocks freed, recomputed later from its tokens). Then waiting
requests are admitted, oldest first, while `max_num_seqs`, the token budget and free blocks
allow, unless something was preempted this step. Finished sequences leave at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from reference_server.scheduling.sequence import Sequence, SequenceStatus
from reference_server.scheduling.strategies.base import ScheduledBatch, Scheduler, Strategy
from reference_server.scheduling.strategies.limits import Limits, check_positive_int, limit


@dataclass(frozen=True)
class ContinuousLimits(Limits):
    """`max_num_seqs` running at once; `max_num_batched_tokens` computed per step (chunked prefill)."""

    max_num_seqs: int = limit(32, "most running sequences")
    max_num_batched_tokens: int = limit(2048, "tokens per step")

    def __post_init__(self) -> None:
        check_positive_int("max_num_seqs", self.max_num_seqs)
        check_positive_int("max_num_batched_tokens", self.max_num_batched_tokens)

    @property
    def max_running(self) -> int:
        return self.max_num_seqs


class ContinuousBatchScheduler(Scheduler):
    limits: ContinuousLimits
    steady_decodes = True   # running decodes first; admission fails again with no more free blocks

    def schedule(self, now: float) -> ScheduledBatch | None:
        batch = ScheduledBatch()
        seqs, counts = batch.seqs, batch.num_new_tokens   # appended in place of batch.add: once per sequence
        budget = self.limits.max_num_batched_tokens
        bm = self.block_manager
        room = bm.block_size
        for seq in list(self.running):
            if budget == 0:
                break
            if seq.status is not SequenceStatus.RUNNING:   # preempted earlier in this loop
                continue
            n = min(len(seq.token_ids) - seq.num_computed_tokens, budget)
            if seq.num_computed_tokens + n > len(seq.block_table) * room:   # bm.blocks_needed > 0: rare in decode
                while not bm.can_append(seq, n):
                    victim = self.running[-1]
                    self._preempt(victim, batch)
                    if victim is seq:
                        break
                if seq.status is not SequenceStatus.RUNNING:
                    continue
                bm.may_append(seq, n)
            seqs.append(seq)
            counts.append(n)
            budget -= n
        while (self.waiting and not batch.preempted and budget > 0
               and len(self.running) < self.limits.max_num_seqs
               and self.block_manager.can_allocate(self.waiting[0])):
            seq = self.waiting.popleft()
            self._admit(seq)
            n = min(seq.num_uncomputed_tokens, budget)
            batch.add(seq, n)
            budget -= n
        return batch if batch.seqs else None

    def seconds_until_schedulable(self, now: float) -> float | None:
        return 0.0 if self.has_unfinished() else None

    def _preempt(self, seq: Sequence, batch: ScheduledBatch) -> None:
        """Recompute-preemption: free `seq`'s blocks and put it at the front of the queue."""
        self.running.remove(seq)
        self.block_manager.deallocate(seq)
        seq.status = SequenceStatus.WAITING
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)
        batch.preempted.append(seq)


STRATEGY = Strategy("continuous", ContinuousLimits, ContinuousBatchScheduler,
                    "iteration-level batching with chunked prefill and preemption")
