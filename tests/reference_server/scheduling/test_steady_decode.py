"""The simulator's fast path (reference_server.scheduling.steady_decode) against stepping, state for state.

A hypothesis state machine drives each built-in strategy on small caches (requests arrive, steps
run, time passes). Whenever a step is steady, it copies the whole scheduler and runs k of the
planned steps twice: once through `advance_decodes`, once through the real schedule/postprocess.
Checked: every stepped batch is the running list decoding one token each with nothing preempted
or admitted (the strategy's `steady_decodes` contract), and afterwards both copies agree on every
sequence (tokens, computed tokens, block table, hashes, status, finish reason), the queues and
their order, and the block manager (free list order, ref counts, hashes, the prefix-cache map).
"""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from reference_server.scheduling.block_manager import BlockManager
from reference_server.scheduling.postprocess import StopRule, postprocess, samples_token
from reference_server.scheduling.sampling import SamplingParams
from reference_server.scheduling.sequence import Sequence
from reference_server.scheduling.steady_decode import advance_decodes, is_steady, plan_steady_run
from reference_server.scheduling.strategies import BUILT_IN, limits_from_flags, make_scheduler

EOS = 3
TOKEN = 0          # what the steady steps sample: neither EOS nor a stop token
STOP = StopRule(eos_id=EOS)
LIMITS = {
    "none": st.just({}),
    "static": st.fixed_dictionaries({"batch_size": st.integers(1, 4), "batch_timeout_ms": st.sampled_from([0.0, 2.0])}),
    "dynamic": st.fixed_dictionaries({"max_batch_size": st.integers(2, 4), "max_queue_delay_us": st.sampled_from([0, 2000])}),
    "continuous": st.fixed_dictionaries({"max_num_seqs": st.integers(1, 4), "max_num_batched_tokens": st.integers(1, 12)}),
}


def snapshot(scheduler) -> dict:
    """Everything the fast path may touch, by value (sequences named by request id)."""
    bm = scheduler.block_manager
    seqs = {s.request_id: s for s in [*scheduler.running, *scheduler.waiting, *scheduler.seen]}
    return {
        "running": [s.request_id for s in scheduler.running], "waiting": [s.request_id for s in scheduler.waiting],
        "seqs": {rid: (list(s.token_ids), s.num_computed_tokens, list(s.block_table), list(s.block_hashes),
                       s.status, s.finish_reason, s.num_cached_tokens) for rid, s in seqs.items()},
        "free": list(bm.free_block_ids), "map": dict(bm.hash_to_block_id),
        "blocks": [(b.ref_count, b.hash, b.token_ids) for b in bm.blocks],
        "preemptions": scheduler.num_preemptions,
    }


class SteadyDecodeMachine(RuleBasedStateMachine):
    @initialize(strategy=st.sampled_from(BUILT_IN), num_blocks=st.integers(3, 16), block_size=st.sampled_from([1, 2, 4]),
                data=st.data())
    def setup(self, strategy, num_blocks, block_size, data):
        self.limits = limits_from_flags(strategy, data.draw(LIMITS[strategy]))
        self.bm = BlockManager(num_blocks, block_size)
        self.scheduler = make_scheduler(self.limits, self.bm)
        self.scheduler.seen = []   # every sequence added, for the snapshot (finished ones included)
        self.now = 0.0
        self.count = 0
        self.steady = False

    @rule(tokens=st.lists(st.integers(0, 3), min_size=1, max_size=10), max_tokens=st.integers(1, 12),
          ignore_eos=st.booleans())
    def arrive(self, tokens, max_tokens, ignore_eos):
        if self.bm.blocks_for(len(tokens) + max_tokens) > self.bm.num_blocks:
            return
        seq = Sequence(f"r{self.count}", tokens, SamplingParams(max_tokens=max_tokens, ignore_eos=ignore_eos),
                       arrival_time=self.now)
        self.count += 1
        self.scheduler.add(seq)
        self.scheduler.seen.append(seq)
        self.steady = False

    @rule(data=st.data())
    def step(self, data):
        self.steady = self._step(self.scheduler, lambda: data.draw(st.integers(0, EOS)), self.now)

    @rule(ms=st.sampled_from([0.5, 3.0]))
    def wait(self, ms):
        self.now += ms / 1e3

    @staticmethod
    def _step(scheduler, draw, now: float) -> bool:
        batch = scheduler.schedule(now)
        if batch is None:
            return False
        tokens = [draw() if samples_token(s, n) else None for s, n in zip(batch.seqs, batch.num_new_tokens)]
        finished = sum(1 for *_, reason in postprocess(scheduler, batch, tokens, STOP) if reason)
        return is_steady(scheduler, batch, finished)

    @precondition(lambda self: self.steady)
    @rule(fraction=st.floats(0, 1))
    def fast_forward(self, fraction):
        run = plan_steady_run(self.scheduler, STOP, TOKEN, limit=64)
        steps = round(fraction * run.steps)
        fast, stepped = copy.deepcopy(self.scheduler), copy.deepcopy(self.scheduler)
        ended = advance_decodes(fast, plan_steady_run(fast, STOP, TOKEN, limit=64), steps, TOKEN, STOP)
        for j in range(steps):
            expected = list(stepped.running)
            batch = stepped.schedule(self.now)
            assert batch is not None and batch.seqs == expected, f"step {j}: not the running list"
            assert batch.num_new_tokens == [1] * len(expected) and not batch.preempted
            postprocess(stepped, batch, [TOKEN] * len(expected), STOP)
        assert snapshot(fast) == snapshot(stepped)
        assert {s.request_id for s in ended} == {s.request_id for s in stepped.seen
                                                 if s.finish_reason and s.request_id not in
                                                 {x.request_id for x in self.scheduler.seen if x.finish_reason}}
        self.scheduler = stepped   # go on from the stepped copy (equal anyway)
        self.bm = stepped.block_manager
        self.steady = False


TestSteadyDecode = SteadyDecodeMachine.TestCase
TestSteadyDecode.settings = settings(max_examples=200, stateful_step_count=40, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])
