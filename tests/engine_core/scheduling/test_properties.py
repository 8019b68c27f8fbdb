"""Property tests (hypothesis state machines): random arrivals, aborts, steps and waits, on small caches.

Invariants checked after every action, for the block manager alone and for each strategy:
  - blocks are conserved: every block is free (ref count 0, on the free list) or held, and its
    ref count equals the number of sequences whose block table holds it (so never negative);
  - a prefix-cache hit serves blocks whose tokens equal the sequence's own;
  - no sequence is both waiting and running; waiting and finished sequences hold no blocks;
  - no strategy runs more than its limits' `max_running`;
and at the end, with no more arrivals, every admitted request that was not aborted finishes
(and the cache is empty again) within a bounded number of steps.

The simulator's fast path (engine_core.scheduling.steady_decode) is checked in the same
machine: whenever a step is steady, `fast_forward` copies the scheduler and its sequences, runs
k of the planned steps through `advance_decodes` on the copy and through the real
schedule/postprocess on the original, and requires (a) every stepped batch to be the running
list decoding one token each, nothing preempted or admitted, whatever time passed before (the
strategy's `steady_decodes` contract), and (b) both to end equal: every sequence's tokens,
computed tokens, block table, hashes, status and finish reason, the queues in order, and the
block manager's free-list order, ref counts, hashes and prefix-cache map.
"""

from __future__ import annotations

import copy
from collections import Counter

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from engine_core.scheduling.block_manager import BlockManager
from engine_core.scheduling.postprocess import StopRule, postprocess, samples_token
from engine_core.scheduling.sampling import SamplingParams
from engine_core.scheduling.sequence import Sequence, SequenceStatus
from engine_core.scheduling.steady_decode import advance_decodes, is_steady, plan_steady_run
from engine_core.scheduling.strategies import BUILT_IN, limits_from_flags, make_scheduler

EOS = 3
STEADY_TOKEN = 0   # what fast-forwarded steps sample: neither EOS nor a stop token
TOKENS = st.lists(st.integers(0, 3), min_size=1, max_size=12)   # a small vocabulary: prefixes repeat
SETTINGS = settings(max_examples=60, stateful_step_count=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

LIMITS = {   # small limits so batches fill, time out, chunk and preempt
    "none": st.just({}),
    "static": st.fixed_dictionaries({"batch_size": st.integers(1, 4), "batch_timeout_ms": st.sampled_from([0.0, 2.0])}),
    "dynamic": st.fixed_dictionaries({"max_batch_size": st.integers(2, 4), "preferred_batch_sizes": st.sampled_from([(), (2,)]),
                                      "max_queue_delay_us": st.sampled_from([0, 2000])}),
    "continuous": st.fixed_dictionaries({"max_num_seqs": st.integers(1, 4), "max_num_batched_tokens": st.integers(1, 12),
                                         "max_prefill_tokens_with_decodes": st.sampled_from([0, 1, 3]),
                                         "chunked_prefill": st.booleans(),
                                         "capacity_policy": st.sampled_from(["max-utilization", "guaranteed-no-evict"])}),
}


def snapshot(scheduler, sequences) -> dict:
    """Everything a step may touch, by value (sequences by request id)."""
    bm = scheduler.block_manager
    return {
        "running": [s.request_id for s in scheduler.running], "waiting": [s.request_id for s in scheduler.waiting],
        "seqs": {s.request_id: (list(s.token_ids), s.num_computed_tokens, list(s.block_table), list(s.block_hashes),
                                s.status, s.finish_reason, s.num_cached_tokens) for s in sequences},
        "free": list(bm.free_block_ids), "map": dict(bm.hash_to_block_id),
        "blocks": [(b.ref_count, b.hash, b.token_ids) for b in bm.blocks], "preemptions": scheduler.num_preemptions,
    }


def check_blocks(bm: BlockManager, holders: list[Sequence]) -> None:
    held = Counter(block_id for seq in holders for block_id in seq.block_table)
    for block in bm.blocks:
        assert block.ref_count == held[block.block_id] >= 0, f"block {block.block_id}"
        assert (block.ref_count == 0) == (block.block_id in bm.free_block_ids)
    assert bm.num_free_blocks + len(held) == bm.num_blocks
    for seq in holders:
        cached = seq.num_cached_tokens // bm.block_size
        for i, block_id in enumerate(seq.block_table[:cached]):
            assert bm.blocks[block_id].token_ids == tuple(seq.token_ids[i * bm.block_size:(i + 1) * bm.block_size])


class BlockManagerMachine(RuleBasedStateMachine):
    """Sequences allocate (maybe hitting the prefix cache), compute, grow and free, in any order."""

    @initialize(num_blocks=st.integers(1, 12), block_size=st.sampled_from([1, 2, 4]))
    def setup(self, num_blocks, block_size):
        self.bm = BlockManager(num_blocks, block_size)
        self.live: list[Sequence] = []
        self.count = 0

    @rule(tokens=TOKENS)
    def allocate(self, tokens):
        seq = Sequence(f"s{self.count}", tokens, SamplingParams(), arrival_time=0.0)
        self.count += 1
        if self.bm.can_allocate(seq):
            self.bm.allocate(seq)
            self.live.append(seq)

    @precondition(lambda self: self.live)
    @rule(pick=st.integers(0, 99), new_token=st.integers(0, 3))
    def compute_then_grow(self, pick, new_token):
        """As a step does: compute the tokens (if the table has room), sample one, then make room for it."""
        seq = self.live[pick % len(self.live)]
        if self.bm.can_append(seq, seq.num_uncomputed_tokens):
            self.bm.may_append(seq, seq.num_uncomputed_tokens)
            seq.num_computed_tokens = seq.num_tokens
            self.bm.commit_computed(seq)
            seq.token_ids.append(new_token)
        assert len(seq.block_table) * self.bm.block_size >= seq.num_computed_tokens

    @precondition(lambda self: self.live)
    @rule(pick=st.integers(0, 99))
    def free(self, pick):
        self.bm.deallocate(self.live.pop(pick % len(self.live)))

    @invariant()
    def blocks_are_conserved(self):
        check_blocks(self.bm, self.live)


class SchedulerMachine(RuleBasedStateMachine):
    """One strategy with random limits: requests arrive, get aborted, steps run, time passes."""

    @initialize(strategy=st.sampled_from(BUILT_IN), num_blocks=st.integers(3, 16), block_size=st.sampled_from([1, 2, 4]),
                data=st.data())
    def setup(self, strategy, num_blocks, block_size, data):
        self.limits = limits_from_flags(strategy, data.draw(LIMITS[strategy]))
        self.bm = BlockManager(num_blocks, block_size)
        self.scheduler = make_scheduler(self.limits, self.bm)
        self.now = 0.0
        self.admitted: dict[str, Sequence] = {}
        self.aborted: set[str] = set()
        self.steady = False   # the last step was steady and nothing was added or aborted since

    @rule(tokens=TOKENS, max_tokens=st.integers(1, 12), ignore_eos=st.booleans())
    def arrive(self, tokens, max_tokens, ignore_eos):
        if self.bm.blocks_for(len(tokens) + max_tokens) > self.bm.num_blocks:
            return   # the engine rejects what the whole cache cannot hold
        seq = Sequence(f"r{len(self.admitted)}", tokens, SamplingParams(max_tokens=max_tokens, ignore_eos=ignore_eos),
                       arrival_time=self.now)
        self.admitted[seq.request_id] = seq
        self.scheduler.add(seq)
        self.steady = False

    @precondition(lambda self: self.scheduler.has_unfinished())
    @rule(pick=st.integers(0, 99))
    def abort(self, pick):
        pending = [seq for seq in self.admitted.values() if not seq.is_finished]
        seq = pending[pick % len(pending)]
        assert self.scheduler.abort(seq.request_id) is seq
        self.aborted.add(seq.request_id)
        self.steady = False

    @rule(data=st.data())
    def step(self, data):
        self._step(lambda: data.draw(st.integers(0, EOS)))

    @rule(ms=st.sampled_from([0.5, 1.0, 3.0]))
    def wait(self, ms):
        self.now += ms / 1e3

    def _step(self, draw_token) -> bool:
        batch = self.scheduler.schedule(self.now)
        if batch is None:
            self.steady = False
            return False
        assert len(batch.num_new_tokens) == len(batch.seqs) and all(n >= 1 for n in batch.num_new_tokens)
        tokens = [draw_token() if samples_token(seq, n) else None for seq, n in zip(batch.seqs, batch.num_new_tokens)]
        sampled = postprocess(self.scheduler, batch, tokens, StopRule(eos_id=EOS))
        self.steady = is_steady(self.scheduler, batch, sum(1 for *_, reason in sampled if reason))
        return True

    @precondition(lambda self: self.steady)
    @rule(fraction=st.floats(0, 1))
    def fast_forward(self, fraction):
        """k steady steps through advance_decodes (on a copy) and through stepping (here): equal after."""
        stop = StopRule(eos_id=EOS)
        fast, fast_seqs = copy.deepcopy((self.scheduler, list(self.admitted.values())))
        run = plan_steady_run(fast, stop, STEADY_TOKEN, limit=64)
        steps = round(fraction * run.steps)
        ended = advance_decodes(fast, run, steps, STEADY_TOKEN, stop)
        finished_before = {rid for rid, s in self.admitted.items() if s.finish_reason}
        for j in range(steps):
            expected = list(self.scheduler.running)
            batch = self.scheduler.schedule(self.now)
            assert batch is not None and batch.seqs == expected, f"steady step {j}: not the running list"
            assert batch.num_new_tokens == [1] * len(expected) and not batch.preempted
            postprocess(self.scheduler, batch, [STEADY_TOKEN] * len(expected), stop)
        assert snapshot(fast, fast_seqs) == snapshot(self.scheduler, self.admitted.values())
        assert {s.request_id for s in ended} == {rid for rid, s in self.admitted.items()
                                                 if s.finish_reason and rid not in finished_before}
        self.steady = False

    @invariant()
    def queues_and_blocks_are_consistent(self):
        waiting, running = self.scheduler.waiting, self.scheduler.running
        assert not {id(s) for s in waiting} & {id(s) for s in running}
        assert len(running) <= self.limits.max_running
        assert all(s.status is SequenceStatus.WAITING and not s.block_table for s in waiting)
        assert all(s.status is SequenceStatus.RUNNING for s in running)
        assert all(not s.block_table for s in self.admitted.values() if s.is_finished)
        check_blocks(self.bm, running)

    def teardown(self):
        """No more arrivals: every admitted, unaborted request finishes, and the cache empties."""
        if not hasattr(self, "scheduler"):
            return
        bound = 1 + sum(2 * (s.num_tokens + s.params.max_tokens) for s in self.admitted.values()) * 4
        for _ in range(bound):
            if not self.scheduler.has_unfinished():
                break
            if not self._step(lambda: 0):
                wait = self.scheduler.seconds_until_schedulable(self.now)
                assert wait is not None and wait > 0, f"stalled with work queued (wait {wait})"
                self.now += wait
        assert not self.scheduler.has_unfinished(), "requests left unfinished"
        for rid, seq in self.admitted.items():
            assert seq.is_finished and (rid in self.aborted or seq.finish_reason in ("stop", "length")), rid
        assert self.bm.num_used_blocks == 0


TestBlockManagerProperties = BlockManagerMachine.TestCase
TestBlockManagerProperties.settings = SETTINGS
TestSchedulerProperties = SchedulerMachine.TestCase
TestSchedulerProperties.settings = settings(SETTINGS, max_examples=300)
