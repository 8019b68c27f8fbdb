"""Many decode steps at once, leaving the scheduler exactly as stepping would (the simulator's fast path).

A step is *steady* when the strategy opts in (`Scheduler.steady_decodes`, whose contract is in
`Scheduler`'s docstring), its batch was the running list (with those that finished in it) at one
token each, nothing was preempted, nothing waits if anything finished, and every running sequence
has just sampled (its next step is a decode). The next steps are then that batch again, until
something is added or aborted, or a sequence finishes or needs a block the free list cannot give.
`plan_steady_run` says how many steps are safe:
    up to the first step that finishes a sequence (included: it ends the run),
    and no further than the free blocks cover the block boundaries crossed;
`advance_decodes` applies k <= that many, with the block manager's own calls in stepping's order:
    step j: may_append(seq, 1) for each sequence at a block boundary, in running order  (schedule)
            each sequence computes one token and appends `token`; full blocks committed  (postprocess)
    and after the last step, the sequences it finished leave the scheduler, in running order.
The property tests (tests/engine_core/scheduling/test_properties.py, `fast_forward`) check the
contract for every built-in strategy and compare `advance_decodes` with stepping, state for state;
tests/calculators/sim/test_fast_path.py compares whole simulated runs. Pure: ints only.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine_core.scheduling.postprocess import StopRule
from engine_core.scheduling.sequence import Sequence
from engine_core.scheduling.strategies.base import ScheduledBatch, Scheduler

ALLOCATE, COMMIT = 0, 1   # within a step: schedule's may_append comes before postprocess's commit


def is_steady(scheduler: Scheduler, batch: ScheduledBatch, finished: int) -> bool:
    """After `postprocess` of `batch`, which finished `finished` of its sequences: will the next
    steps repeat it, less those (module docstring)?"""
    running = scheduler.running
    if (not scheduler.steady_decodes or batch.preempted or not running or len(batch.seqs) != len(running) + finished
            or (finished and scheduler.waiting)):
        return False
    for n in batch.num_new_tokens:
        if n != 1:
            return False
    queued = iter(running)
    for seq in batch.seqs:
        if seq.finish_reason is not None:   # finished in this step (running sequences have none)
            continue
        if seq is not next(queued) or seq.num_computed_tokens != len(seq.token_ids) - 1 \
                or len(seq.token_ids) <= seq.num_prompt_tokens:
            return False
    return True


@dataclass(frozen=True)
class SteadyRun:
    """`steps` safe steady steps, and the allocations they make: (step, position in running), in order."""

    steps: int
    allocations: tuple[tuple[int, int], ...]


def plan_steady_run(scheduler: Scheduler, stop: StopRule, token: int, limit: int) -> SteadyRun:
    """At most `limit` steps, each appending `token` to every running sequence: up to the first that
    finishes one, and only as far as every block boundary crossed gets a free block."""
    steps = limit
    for seq in scheduler.running:
        params, produced = seq.params, len(seq.token_ids) - seq.num_prompt_tokens
        steps = min(steps, params.max_tokens - produced)
        if stop.max_model_len is not None:
            steps = min(steps, stop.max_model_len - len(seq.token_ids))
        if token in params.stop_token_ids or (token == stop.eos_id and not params.ignore_eos):
            steps = min(steps, max(params.min_tokens - produced, 1))
    if steps <= 0:
        return SteadyRun(0, ())
    bm = scheduler.block_manager
    bs = bm.block_size
    allocations = []
    for position, seq in enumerate(scheduler.running):
        # step j computes token c + j - 1; it needs a block when that token starts one past the table
        first = len(seq.block_table) * bs - seq.num_computed_tokens + 1
        if first <= steps:
            allocations += [(j, position) for j in range(first, steps + 1, bs)]
    if len(allocations) > bm.num_free_blocks:
        allocations.sort()
        free = bm.num_free_blocks
        steps = allocations[free][0] - 1   # the step whose block is missing runs the real way (preemption)
        allocations = [a for a in allocations[:free] if a[0] <= steps]
    return SteadyRun(steps, tuple(allocations))


def advance_decodes(scheduler: Scheduler, run: SteadyRun, steps: int, token: int, stop: StopRule) -> list[Sequence]:
    """Apply `steps` (<= run.steps) steady steps to the running sequences; the ones the last step
    finished (they have left the scheduler, `finish_reason` set)."""
    if not 0 <= steps <= run.steps:
        raise ValueError(f"steps must be in [0, {run.steps}], got {steps}")
    if steps == 0:
        return []
    bm = scheduler.block_manager
    bs = bm.block_size
    seqs = list(scheduler.running)
    start = [seq.num_computed_tokens for seq in seqs]
    events = [(j, ALLOCATE, position) for j, position in run.allocations if j <= steps]
    for position, computed in enumerate(start):
        first = bs - computed % bs   # the step after which token c + j fills a block
        if first <= steps:
            events += [(j, COMMIT, position) for j in range(first, steps + 1, bs)]
    for seq in seqs:
        seq.token_ids.extend([token] * steps)
    events.sort()
    for j, kind, position in events:
        seq = seqs[position]
        if kind == ALLOCATE:
            seq.num_computed_tokens = start[position] + j - 1
            bm.may_append(seq, 1)
        else:
            seq.num_computed_tokens = start[position] + j
            bm.commit_computed(seq)
    finished = []
    for seq, computed in zip(seqs, start):
        seq.num_computed_tokens = computed + steps
        if steps == run.steps:   # only the plan's last step can end a sequence
            reason = stop.finish_reason(seq, token)
            if reason is not None:
                seq.finish_reason = reason
                scheduler.finish(seq)
                finished.append(seq)
    return finished
