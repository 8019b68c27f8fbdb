"""The interface every batching strategy implements. Plain Python: no torch, no clock reads.

A scheduler owns the waiting queue and the running list, decides each step which sequences
run and how many of their tokens (a whole prompt, a prefill chunk, or one decode token),
and asks the block manager for KV blocks. Time comes in as `now` so tests need no sleeps.
A `Strategy` names one: its `Limits` class and its `Scheduler` class (the registry's entry).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass, field

from engine_core.scheduling.block_manager import BlockManager
from engine_core.scheduling.sequence import Sequence, SequenceStatus
from engine_core.scheduling.strategies.limits import Limits


@dataclass(slots=True)
class ScheduledBatch:
    """One step's work: `seqs[i]` computes its next `num_new_tokens[i]` tokens."""

    seqs: list[Sequence] = field(default_factory=list)
    num_new_tokens: list[int] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)

    def add(self, seq: Sequence, num_new_tokens: int) -> None:
        self.seqs.append(seq)
        self.num_new_tokens.append(num_new_tokens)

    @property
    def num_tokens(self) -> int:
        return sum(self.num_new_tokens)

    def __len__(self) -> int:
        return len(self.seqs)


class Scheduler(ABC):
    """Waiting queue (FIFO, preempted sequences go back to the front) and running list (admission order).

    `steady_decodes` (a strategy opts in; see `engine_core.scheduling.steady_decode`): when a
    batch was exactly `running`, every sequence computing one token, nothing preempted, then until a
    request is added, aborted or finishes, and while the free blocks cover every sequence's growth,
    each `schedule(now)` returns that batch again (whatever `now`), admitting nothing, preempting
    nothing, and doing only `may_append` for the sequences at a block boundary, in running order.
    The simulator then runs such stretches at once instead of step by step.
    """

    steady_decodes = False

    def __init__(self, limits: Limits, block_manager: BlockManager) -> None:
        self.limits = limits
        self.block_manager = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0

    # -- queue ---------------------------------------------------------------------------
    def add(self, seq: Sequence) -> None:
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    def abort(self, request_id: str) -> Sequence | None:
        """Remove the request wherever it is and free its blocks; None if unknown."""
        for seq in self.waiting:
            if seq.request_id == request_id:
                self.waiting.remove(seq)
                seq.status = SequenceStatus.FINISHED
                return seq
        for seq in self.running:
            if seq.request_id == request_id:
                self.finish(seq)
                return seq
        return None

    def finish(self, seq: Sequence) -> None:
        """`seq` is done: it leaves the running list and its blocks are released now."""
        self.running.remove(seq)
        self.block_manager.deallocate(seq)
        seq.status = SequenceStatus.FINISHED

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    # -- strategy ------------------------------------------------------------------------
    @abstractmethod
    def schedule(self, now: float) -> ScheduledBatch | None:
        """This step's batch, or None when nothing may run yet."""

    @abstractmethod
    def seconds_until_schedulable(self, now: float) -> float | None:
        """0.0 when `schedule` would do work now, the wait for a batch to form, None when idle."""

    # -- helpers for subclasses ----------------------------------------------------------
    def _admit(self, seq: Sequence) -> None:
        self.block_manager.allocate(seq)
        seq.status = SequenceStatus.RUNNING
        self.running.append(seq)


@dataclass(frozen=True)
class Strategy:
    """One batching strategy as the registry holds it.

    Attributes:
        name: what `--strategy` and `/v1/engine` call it.
        limits: its `Limits` dataclass (flags, defaults, validation, `describe`, `max_running`).
        scheduler: its `Scheduler` class, built as `scheduler(limits, block_manager)`.
        summary: one line for `--help`.
    """

    name: str
    limits: type[Limits]
    scheduler: type[Scheduler]
    summary: str = ""
