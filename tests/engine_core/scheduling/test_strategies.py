"""Batching strategies as pure functions of (queue, blocks, now): no model, no sleeps."""

import pytest

from engine_core.scheduling.block_manager import BlockManager
from engine_core.scheduling.sampling import SamplingParams
from engine_core.scheduling.sequence import Sequence, SequenceStatus
from engine_core.scheduling.strategies import STRATEGIES, limits_from_flags, make_scheduler
from engine_core.scheduling.strategies.dynamic import dynamic_batch_size


def make(strategy, num_blocks=64, block_size=4, **limits):
    bm = BlockManager(num_blocks, block_size)
    return make_scheduler(limits_from_flags(strategy, limits), bm), bm


def req(rid, prompt_len=6, max_tokens=4, t=0.0):
    return Sequence(rid, [1] * prompt_len, SamplingParams(max_tokens=max_tokens), arrival_time=t)


def advance(sched, batch):
    """The engine's postprocess: tokens computed, a token sampled at the end, finish at max_tokens."""
    for s, n in zip(batch.seqs, batch.num_new_tokens):
        s.num_computed_tokens += n
        sched.block_manager.commit_computed(s)
        if s.num_computed_tokens == s.num_tokens:
            s.token_ids.append(2)
            if s.num_output_tokens >= s.params.max_tokens:
                sched.finish(s)


def drain(sched, now=0.0, limit=1000):
    """Run to empty; return the list of batches (request ids per step)."""
    steps = []
    while sched.has_unfinished() and limit:
        batch = sched.schedule(now)
        assert batch is not None
        steps.append([s.request_id for s in batch.seqs])
        advance(sched, batch)
        limit -= 1
    return steps


# -- the Triton rule ----------------------------------------------------------------------

@pytest.mark.parametrize("waiting, waited, preferred, expected", [
    (0, 9.0, (), None),           # nothing waiting
    (8, 0.0, (), 8),              # max_batch_size reached
    (12, 0.0, (4,), 8),           # more than max: launch max
    (3, 0.0, (), None),           # below max, delay not over
    (3, 0.002, (), 3),            # delay over: whatever is there
    (5, 0.0, (2, 4), 4),          # largest reachable preferred size
    (3, 0.0, (2, 4), 2),
    (1, 0.0, (2, 4), None),
    (1, 0.001, (2, 4), 1),        # exactly at the delay
])
def test_dynamic_batch_size_triton_rule(waiting, waited, preferred, expected):
    got = dynamic_batch_size(waiting, waited, max_batch_size=8, preferred_batch_sizes=preferred,
                             max_queue_delay_s=0.001)
    assert got == expected


def test_dynamic_zero_delay_launches_at_once():
    assert dynamic_batch_size(2, 0.0, max_batch_size=8, preferred_batch_sizes=(),
                              max_queue_delay_s=0.0) == 2


# -- none -----------------------------------------------------------------------------------

def test_none_runs_one_request_start_to_finish():
    sched, bm = make("none")
    for i in range(3):
        sched.add(req(f"r{i}", max_tokens=2))
    steps = drain(sched)
    assert steps == [["r0"], ["r0"], ["r1"], ["r1"], ["r2"], ["r2"]]
    assert bm.num_used_blocks == 0


def test_none_prefills_whole_prompt_in_one_step():
    sched, _ = make("none", max_num_batched_tokens=2)   # the token budget is a continuous-only limit
    sched.add(req("r0", prompt_len=10))
    batch = sched.schedule(0.0)
    assert batch.num_new_tokens == [10]


# -- static ---------------------------------------------------------------------------------

def test_static_waits_for_batch_size_or_timeout():
    sched, _ = make("static", batch_size=3, batch_timeout_ms=50.0)
    sched.add(req("a", t=0.0))
    sched.add(req("b", t=0.01))
    assert sched.schedule(0.02) is None
    assert sched.seconds_until_schedulable(0.02) == pytest.approx(0.03)
    batch = sched.schedule(0.05)                      # oldest waited 50 ms
    assert [s.request_id for s in batch.seqs] == ["a", "b"]


def test_static_launches_full_batch_immediately_and_admits_nothing_until_done():
    sched, bm = make("static", batch_size=2, batch_timeout_ms=1e6)
    sched.add(req("short", max_tokens=1))
    sched.add(req("long", max_tokens=3))
    sched.add(req("late", max_tokens=1))
    assert sched.seconds_until_schedulable(0.0) == 0.0
    steps = drain(sched, now=1e9)   # "late" only launches by timeout, after the batch is done
    assert steps == [["short", "long"], ["long"], ["long"], ["late"]]
    assert bm.num_used_blocks == 0


def test_static_idle_is_none():
    sched, _ = make("static")
    assert sched.seconds_until_schedulable(0.0) is None
    assert sched.schedule(0.0) is None


# -- dynamic --------------------------------------------------------------------------------

def test_dynamic_waits_queue_delay_then_launches():
    sched, _ = make("dynamic", max_batch_size=4, max_queue_delay_us=1000)
    sched.add(req("a", t=10.0))
    assert sched.schedule(10.0005) is None
    assert sched.seconds_until_schedulable(10.0005) == pytest.approx(0.0005)
    batch = sched.schedule(10.001)
    assert [s.request_id for s in batch.seqs] == ["a"]


def test_dynamic_preferred_size_launches_early_and_runs_to_completion():
    sched, _ = make("dynamic", max_batch_size=4, preferred_batch_sizes=(2,), max_queue_delay_us=10**6)
    for rid in "abc":
        sched.add(req(rid, max_tokens=2))
    batch = sched.schedule(0.0)
    assert [s.request_id for s in batch.seqs] == ["a", "b"]
    advance(sched, batch)
    assert [s.request_id for s in sched.schedule(0.0).seqs] == ["a", "b"]   # c waits for the batch


def test_run_to_completion_reserves_worst_case_blocks():
    # each request: 6 prompt + 6 output = 12 tokens = 3 blocks of 4; 7 blocks fit two, not three
    sched, bm = make("static", num_blocks=7, batch_size=3, batch_timeout_ms=0.0)
    for rid in "abc":
        sched.add(req(rid, max_tokens=6))
    batch = sched.schedule(0.0)
    assert [s.request_id for s in batch.seqs] == ["a", "b"]
    steps = drain(sched)
    assert steps[-1] == ["c"] and bm.num_used_blocks == 0


# -- continuous -----------------------------------------------------------------------------

def test_continuous_admits_every_step_and_finished_leave_at_once():
    sched, bm = make("continuous", max_num_seqs=2)
    sched.add(req("a", max_tokens=1))
    sched.add(req("b", max_tokens=3))
    sched.add(req("c", max_tokens=1))
    steps = drain(sched)
    assert steps[0] == ["a", "b"]
    assert steps[1] == ["b", "c"]           # a left after one token, c took its slot
    assert bm.num_used_blocks == 0


def test_continuous_chunked_prefill_under_token_budget():
    sched, _ = make("continuous", max_num_batched_tokens=4)
    sched.add(req("a", prompt_len=10))
    sched.add(req("b", prompt_len=3))
    b1 = sched.schedule(0.0)
    assert b1.num_new_tokens == [4]          # a's first chunk takes the whole budget
    advance(sched, b1)
    b2 = sched.schedule(0.0)
    assert b2.num_new_tokens == [4]
    advance(sched, b2)
    b3 = sched.schedule(0.0)
    assert [s.request_id for s in b3.seqs] == ["a", "b"] and b3.num_new_tokens == [2, 2]
    advance(sched, b3)
    assert sched.running[0].num_output_tokens == 1   # a's prompt done: first token sampled
    assert sched.running[1].num_output_tokens == 0   # b mid-prefill


def test_continuous_decodes_are_scheduled_before_new_prefills():
    sched, _ = make("continuous", max_num_batched_tokens=8)
    sched.add(req("a", prompt_len=4, max_tokens=5))
    advance(sched, sched.schedule(0.0))
    sched.add(req("b", prompt_len=20))
    batch = sched.schedule(0.0)
    assert batch.num_new_tokens == [1, 7]


def own_prompt(rid, prompt_len, max_tokens=4):
    """A request whose prompt shares no prefix-cache block with another's."""
    return Sequence(rid, [ord(rid)] * prompt_len, SamplingParams(max_tokens=max_tokens), arrival_time=0.0)


def test_continuous_caps_prompt_tokens_while_sequences_decode():
    sched, _ = make("continuous", max_num_batched_tokens=32, max_prefill_tokens_with_decodes=5)
    sched.add(own_prompt("a", 12, max_tokens=9))
    first = sched.schedule(0.0)
    assert first.num_new_tokens == [12]      # nothing decodes yet: the whole budget
    advance(sched, first)
    sched.add(own_prompt("b", 8))
    sched.add(own_prompt("c", 8))
    second = sched.schedule(0.0)
    assert [s.request_id for s in second.seqs] == ["a", "b"] and second.num_new_tokens == [1, 5]
    advance(sched, second)
    third = sched.schedule(0.0)               # b's rest (3) and c's first 2 share the cap
    assert [s.request_id for s in third.seqs] == ["a", "b", "c"] and third.num_new_tokens == [1, 3, 2]


def test_continuous_prefill_cap_zero_lets_prompts_take_the_whole_budget():
    sched, _ = make("continuous", max_num_batched_tokens=32, max_prefill_tokens_with_decodes=0)
    sched.add(own_prompt("a", 4, max_tokens=9))
    advance(sched, sched.schedule(0.0))
    sched.add(own_prompt("b", 20))
    assert sched.schedule(0.0).num_new_tokens == [1, 20]


def test_continuous_respects_max_num_seqs():
    sched, _ = make("continuous", max_num_seqs=2)
    for rid in "abcd":
        sched.add(req(rid))
    assert len(sched.schedule(0.0)) == 2
    assert len(sched.waiting) == 2


def test_continuous_preempts_newest_when_blocks_run_out_and_still_finishes():
    # 4-token blocks, 6 blocks; each request grows to 6 + 8 = 14 tokens = 4 blocks: two cannot both finish
    sched, bm = make("continuous", num_blocks=6, max_num_seqs=4)
    sched.add(req("old", max_tokens=8))
    sched.add(req("new", max_tokens=8))
    preempted = []
    steps = 0
    while sched.has_unfinished():
        batch = sched.schedule(0.0)
        preempted += [s.request_id for s in batch.preempted]
        advance(sched, batch)
        steps += 1
        assert steps < 200
    assert preempted and set(preempted) == {"new"}
    assert sched.num_preemptions == len(preempted)
    assert bm.num_used_blocks == 0


def test_guaranteed_no_evict_admits_what_can_grow_to_max_tokens_and_never_preempts():
    # the same two requests and 6 blocks: each may grow to 4 blocks, so the second waits for the first
    sched, bm = make("continuous", num_blocks=6, max_num_seqs=4, capacity_policy="guaranteed-no-evict")
    sched.add(req("old", max_tokens=8))
    sched.add(req("new", max_tokens=8))
    steps = drain(sched)
    assert sched.num_preemptions == 0
    assert steps[:8] == [["old"]] * 8                # old's prompt, then 7 decodes: new is never admitted
    assert steps[8] == ["new"] and all(step == ["new"] for step in steps[8:])
    assert bm.num_used_blocks == 0


def test_guaranteed_no_evict_counts_what_running_sequences_may_still_take():
    # 6 blocks of 4: a holds 2 and may reach 4; b (prompt 6, max 2) holds its 2 at most: 4 + 2 <= 6 -> both
    sched, _ = make("continuous", num_blocks=6, capacity_policy="guaranteed-no-evict")
    sched.add(req("a", prompt_len=6, max_tokens=8))
    sched.add(req("b", prompt_len=6, max_tokens=2))
    first = sched.schedule(0.0)
    assert [s.request_id for s in first.seqs] == ["a", "b"]   # 4 + 2 blocks = the 6 there are
    sched.add(req("c", prompt_len=2, max_tokens=1))
    advance(sched, first)
    assert [s.request_id for s in sched.schedule(0.0).seqs] == ["a", "b"]   # c would need a 7th block


def test_without_chunked_prefill_a_prompt_waits_for_a_step_it_fits_whole():
    sched, _ = make("continuous", max_num_batched_tokens=8, max_prefill_tokens_with_decodes=0,
                    chunked_prefill=False)
    for rid in "abc":
        sched.add(own_prompt(rid, 5, max_tokens=3))
    first = sched.schedule(0.0)
    assert first.num_new_tokens == [5]                 # b's 5 tokens do not fit the 3 left: no chunk of it
    advance(sched, first)
    second = sched.schedule(0.0)
    assert [s.request_id for s in second.seqs] == ["a", "b"] and second.num_new_tokens == [1, 5]
    advance(sched, second)
    third = sched.schedule(0.0)
    assert [s.request_id for s in third.seqs] == ["a", "b", "c"] and third.num_new_tokens == [1, 1, 5]
    chunked, _ = make("continuous", max_num_batched_tokens=8, max_prefill_tokens_with_decodes=0)
    for rid in "abc":
        chunked.add(own_prompt(rid, 5, max_tokens=3))
    assert chunked.schedule(0.0).num_new_tokens == [5, 3]   # the default splits b


def test_without_chunked_prefill_a_prompt_longer_than_the_budget_runs_alone():
    sched, _ = make("continuous", max_num_batched_tokens=4, chunked_prefill=False)
    sched.add(own_prompt("a", 10))
    sched.add(own_prompt("b", 2))
    first = sched.schedule(0.0)
    assert [s.request_id for s in first.seqs] == ["a"] and first.num_new_tokens == [10]


def test_preempted_sequence_goes_to_front_and_recomputes_its_tokens():
    sched, bm = make("continuous", num_blocks=4, max_num_seqs=4)
    a, b = req("a", prompt_len=4, max_tokens=8), req("b", prompt_len=4, max_tokens=8)
    sched.add(a)
    sched.add(b)
    sched.add(req("c", prompt_len=4, max_tokens=1))
    while not b.num_preemptions:
        advance(sched, sched.schedule(0.0))
    assert sched.waiting[0] is b and b.status is SequenceStatus.WAITING
    assert b.block_table == [] and b.num_computed_tokens == 0
    assert b.num_tokens > 4                  # generated tokens are kept and recomputed later


def test_abort_frees_blocks_from_running_and_waiting():
    sched, bm = make("continuous", max_num_seqs=1)
    sched.add(req("a"))
    sched.add(req("b"))
    sched.schedule(0.0)
    assert bm.num_used_blocks > 0
    assert sched.abort("a").request_id == "a"
    assert sched.abort("b").request_id == "b"
    assert sched.abort("zzz") is None
    assert bm.num_used_blocks == 0 and not sched.has_unfinished()


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_strategy_drains_and_returns_all_blocks(strategy):
    sched, bm = make(strategy, num_blocks=16, batch_size=3, batch_timeout_ms=0.0, max_batch_size=3,
                     max_queue_delay_us=0, max_num_seqs=3, max_num_batched_tokens=8)
    for i in range(7):
        sched.add(req(f"r{i}", prompt_len=3 + i, max_tokens=1 + i % 3))
    drain(sched)
    assert bm.num_used_blocks == 0 and not sched.has_unfinished()
    assert sched.seconds_until_schedulable(0.0) is None


def test_a_prompt_received_from_a_prefill_worker_holds_its_blocks_then_computes_only_its_last_token():
    sched, bm = make("continuous", max_num_seqs=8, max_num_batched_tokens=64)
    local, remote = req("local", prompt_len=10), req("remote", prompt_len=20)
    remote.kv_transfer_s = 0.5
    sched.add(local)
    sched.add(remote)
    first = sched.schedule(0.0)
    assert [s.request_id for s in first.seqs] == ["local"] and first.num_new_tokens == [10]
    assert remote.block_table and remote.num_computed_tokens == 19 and remote.kv_ready_at == 0.5   # held, not run
    advance(sched, first)
    assert [s.request_id for s in sched.schedule(0.2).seqs] == ["local"]
    local.num_computed_tokens += 1
    local.token_ids.append(2)
    sched.finish(local)
    assert sched.schedule(0.3) is None and sched.seconds_until_schedulable(0.3) == pytest.approx(0.2)
    ready = sched.schedule(0.5)
    assert [s.request_id for s in ready.seqs] == ["remote"] and ready.num_new_tokens == [1]   # never its prompt
    advance(sched, ready)
    assert remote.num_output_tokens == 1 and remote.kv_ready_at is None and remote.kv_transfer_s is None
