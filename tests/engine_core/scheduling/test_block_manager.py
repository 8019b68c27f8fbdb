"""BlockManager: free list, ref counts, hash-chained prefix cache confirmed by token equality."""

import pytest

from engine_core.scheduling import block_manager as bm_module
from engine_core.scheduling.block_manager import BlockManager
from engine_core.scheduling.sampling import SamplingParams
from engine_core.scheduling.sequence import Sequence


def seq(tokens, rid="r"):
    return Sequence(rid, list(tokens), SamplingParams(max_tokens=4), arrival_time=0.0)


def compute_all(bm, s):
    """What the engine does after a step that computed every token of `s`."""
    s.num_computed_tokens = s.num_tokens
    bm.commit_computed(s)


def test_allocate_takes_ceil_blocks_and_deallocate_returns_them():
    bm = BlockManager(num_blocks=8, block_size=4)
    s = seq(range(9))                       # 9 tokens -> 3 blocks
    assert bm.can_allocate(s)
    bm.allocate(s)
    assert len(s.block_table) == 3 and len(set(s.block_table)) == 3
    assert bm.num_used_blocks == 3 and bm.num_free_blocks == 5
    assert s.num_computed_tokens == 0 and s.num_cached_tokens == 0
    bm.deallocate(s)
    assert bm.num_used_blocks == 0 and s.block_table == [] and s.num_computed_tokens == 0


def test_can_allocate_false_when_too_few_free_blocks():
    bm = BlockManager(num_blocks=2, block_size=4)
    assert not bm.can_allocate(seq(range(9)))
    with pytest.raises(RuntimeError):
        bm.allocate(seq(range(9)))
    assert bm.num_used_blocks == 0


def test_append_grows_only_at_block_boundaries():
    bm = BlockManager(num_blocks=4, block_size=4)
    s = seq(range(4))
    bm.allocate(s)
    compute_all(bm, s)                      # 4 computed, table holds 1 block
    s.token_ids.append(99)
    assert bm.can_append(s, 1)
    bm.may_append(s, 1)                     # token 5 needs a second block
    assert len(s.block_table) == 2
    s.num_computed_tokens = 5
    s.token_ids.append(100)
    bm.may_append(s, 1)                     # token 6 still fits block 2
    assert len(s.block_table) == 2 and bm.num_used_blocks == 2


def test_can_append_false_when_cache_full():
    bm = BlockManager(num_blocks=1, block_size=4)
    s = seq(range(4))
    bm.allocate(s)
    compute_all(bm, s)
    assert not bm.can_append(s, 1)
    with pytest.raises(RuntimeError):
        bm.may_append(s, 1)


def test_prefix_hit_after_commit_shares_blocks_with_ref_counts():
    bm = BlockManager(num_blocks=10, block_size=4)
    a = seq(range(10), "a")                 # blocks [0..3] [4..7] [8, 9]
    bm.allocate(a)
    compute_all(bm, a)
    b = seq(list(range(8)) + [50, 51, 52], "b")
    bm.allocate(b)
    assert b.block_table[:2] == a.block_table[:2]
    assert b.block_table[2] not in a.block_table
    assert b.num_cached_tokens == 8 and b.num_computed_tokens == 8
    assert bm.blocks[a.block_table[0]].ref_count == 2
    assert bm.prefix_cache_hit_tokens == 8 and bm.prefix_cache_query_tokens == 10 + 11
    bm.deallocate(a)
    assert bm.blocks[b.block_table[0]].ref_count == 1
    bm.deallocate(b)
    assert bm.num_used_blocks == 0


def test_without_shared_prefixes_only_a_preempted_sequence_finds_its_own_blocks():
    bm = BlockManager(num_blocks=10, block_size=4, shared_prefixes=False)
    a = seq(range(10), "a")
    bm.allocate(a)
    compute_all(bm, a)
    assert a.block_hashes == [] and bm.hash_to_block_id == {}   # nothing hashed as blocks fill
    bm.deallocate(a, preempted=True)                            # a preemption registers them
    assert len(bm.hash_to_block_id) == 2
    again = seq(range(10), "a")
    bm.allocate(again)
    assert again.num_cached_tokens == 8 and bm.prefix_cache_hit_tokens == 8
    compute_all(bm, again)
    bm.deallocate(again)                                        # finished: nothing more registered
    b = seq(range(100, 110), "b")
    bm.allocate(b)
    compute_all(bm, b)
    bm.deallocate(b)
    assert len(bm.hash_to_block_id) == 2 and bm.prefix_cache_query_tokens == 30
    assert bm.num_used_blocks == 0


def test_no_hit_before_the_block_is_computed():
    """Blocks are registered only once their K/V exists, never at allocation."""
    bm = BlockManager(num_blocks=10, block_size=4)
    a = seq(range(12), "a")
    bm.allocate(a)                          # allocated, nothing computed yet
    b = seq(range(12), "b")
    bm.allocate(b)
    assert b.num_cached_tokens == 0
    a.num_computed_tokens = 4               # one chunk of prefill done
    bm.commit_computed(a)
    c = seq(range(12), "c")
    bm.allocate(c)
    assert c.num_cached_tokens == 4 and c.block_table[0] == a.block_table[0]


def test_last_token_is_never_served_from_cache():
    """A prompt that is exactly cached still recomputes its last block, to get logits."""
    bm = BlockManager(num_blocks=10, block_size=4)
    a = seq(range(8), "a")
    bm.allocate(a)
    compute_all(bm, a)
    b = seq(range(8), "b")
    bm.allocate(b)
    assert b.num_cached_tokens == 4 and b.num_computed_tokens == 4
    assert b.block_table[1] != a.block_table[1]


def test_hash_collision_is_rejected_by_token_comparison(monkeypatch):
    monkeypatch.setattr(bm_module, "chain_hash", lambda parent, tokens: 7)   # every block collides
    bm = BlockManager(num_blocks=10, block_size=4)
    a = seq([1, 2, 3, 4, 5], "a")
    bm.allocate(a)
    compute_all(bm, a)
    b = seq([9, 9, 9, 9, 5], "b")
    bm.allocate(b)
    assert b.num_cached_tokens == 0 and b.block_table[0] != a.block_table[0]


def test_freed_cached_block_is_revived_then_evicted_when_reused():
    bm = BlockManager(num_blocks=3, block_size=4)
    a = seq(range(5), "a")                  # 2 blocks, first one full
    bm.allocate(a)
    compute_all(bm, a)
    first = a.block_table[0]
    bm.deallocate(a)
    assert bm.num_used_blocks == 0
    b = seq(range(5), "b")                  # revives the freed cached block
    bm.allocate(b)
    assert b.block_table[0] == first and b.num_cached_tokens == 4
    bm.deallocate(b)
    # fill the cache with unrelated tokens: the cached block is handed out and forgotten
    c = seq([200] * 12, "c")
    bm.allocate(c)
    bm.deallocate(c)
    d = seq(range(5), "d")
    bm.allocate(d)
    assert d.num_cached_tokens == 0


def test_chained_hash_depends_on_the_whole_prefix():
    """Same second block after a different first block is not a hit."""
    bm = BlockManager(num_blocks=10, block_size=2)
    a = seq([1, 2, 3, 4, 5], "a")
    bm.allocate(a)
    compute_all(bm, a)
    b = seq([9, 9, 3, 4, 5], "b")
    bm.allocate(b)
    assert b.num_cached_tokens == 0


def test_bad_sizes_rejected():
    with pytest.raises(ValueError, match="num_blocks"):
        BlockManager(num_blocks=0, block_size=4)
