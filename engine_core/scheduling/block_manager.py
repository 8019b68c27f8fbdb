"""Paged KV-cache bookkeeping: block ids, ref counts and a hash-chained prefix cache. No torch.

Block `b` owns cache slots `[b * block_size, (b + 1) * block_size)`. A full block whose K/V
has been computed is registered under a hash chained on the previous block's hash; a later
sequence with the same token prefix shares it (ref count + 1) once the tokens compare equal.
A freed block keeps its hash and contents until it is handed out again, so a finished
request's prefix stays reusable while the cache has room (oldest-freed is reused first).

`shared_prefixes=False` is for token streams that no two sequences share (the fleet plan's
requests when its demand has no shared prefix): a sequence's blocks can then be hit only by itself,
after a preemption frees them. So its full blocks are hashed and registered when it is preempted
rather than as they fill, and a finished sequence's blocks never: the same hits, the same blocks
and the same order of reuse, without a hash per full block of every request.
"""

from __future__ import annotations

from collections import OrderedDict

from engine_core.scheduling.sequence import Sequence


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def chain_hash(parent_hash: int | None, token_ids: tuple[int, ...]) -> int:
    return hash((parent_hash, token_ids))


def chain_root(seq: Sequence) -> int | None:
    """Where a sequence's chain of block hashes starts: a LoRA adapter changes every layer's K and V, so
    the same tokens under another adapter (or the base model) are other blocks."""
    return None if seq.lora is None else hash(("lora", seq.lora))


class Block:
    __slots__ = ("block_id", "ref_count", "hash", "token_ids")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_count = 0
        self.hash: int | None = None
        self.token_ids: tuple[int, ...] = ()


class BlockManager:
    """Check-then-commit: `can_allocate`/`allocate`, `can_append`/`may_append`, `deallocate`."""

    def __init__(self, num_blocks: int, block_size: int, shared_prefixes: bool = True) -> None:
        if num_blocks <= 0 or block_size <= 0:
            raise ValueError(f"num_blocks and block_size must be positive, got {num_blocks}, {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_block_ids: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self.hash_to_block_id: dict[int, int] = {}
        self.shared_prefixes = shared_prefixes
        self.prefix_cache_query_tokens = 0  # tokens looked up at admission (hit rate = hits / queries)
        self.prefix_cache_hit_tokens = 0    # of which served from the cache

    # -- queries -------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_ids)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - len(self.free_block_ids)

    def blocks_for(self, num_tokens: int) -> int:
        return cdiv(num_tokens, self.block_size)

    # -- admission -----------------------------------------------------------------------
    def can_allocate(self, seq: Sequence) -> bool:
        """Room for all of `seq`'s current tokens (conservative: prefix hits not counted)."""
        return self.blocks_for(seq.num_tokens) <= self.num_free_blocks

    def allocate(self, seq: Sequence) -> None:
        """Give `seq` blocks for its current tokens, reusing cached full blocks of its prefix.

        Only blocks inside the first `num_tokens - 1` tokens may hit: the last token must be
        recomputed to produce logits. Sets num_computed_tokens = num_cached_tokens.
        """
        assert not seq.block_table, f"{seq.request_id} already holds blocks"
        if not self.can_allocate(seq):
            raise RuntimeError(f"not enough free KV blocks for {seq.request_id}")
        bs = self.block_size
        cacheable = (seq.num_tokens - 1) // bs
        parent = chain_root(seq)
        hits = 0
        self.prefix_cache_query_tokens += seq.num_tokens
        for i in range(cacheable):
            tokens = tuple(seq.token_ids[i * bs:(i + 1) * bs])
            h = chain_hash(parent, tokens)
            block_id = self.hash_to_block_id.get(h)
            if block_id is None or self.blocks[block_id].token_ids != tokens:
                break
            self._take(block_id)
            seq.block_table.append(block_id)
            seq.block_hashes.append(h)
            parent = h
            hits += 1
        seq.block_table.extend(self._take_fresh_many(self.blocks_for(seq.num_tokens) - hits))
        seq.num_cached_tokens = hits * bs
        seq.num_computed_tokens = hits * bs
        self.prefix_cache_hit_tokens += hits * bs

    # -- growth --------------------------------------------------------------------------
    def blocks_needed(self, seq: Sequence, num_new_tokens: int) -> int:
        """New blocks `seq` needs to compute `num_new_tokens` more tokens (0 for most decode steps)."""
        return -(-(seq.num_computed_tokens + num_new_tokens) // self.block_size) - len(seq.block_table)

    def can_append(self, seq: Sequence, num_new_tokens: int) -> bool:
        """Room to compute `num_new_tokens` more of `seq`'s tokens."""
        return self.blocks_needed(seq, num_new_tokens) <= len(self.free_block_ids)

    def may_append(self, seq: Sequence, num_new_tokens: int) -> None:
        needed = self.blocks_needed(seq, num_new_tokens)
        if needed <= 0:
            return
        if needed > len(self.free_block_ids):
            raise RuntimeError(f"not enough free KV blocks to extend {seq.request_id}")
        seq.block_table.extend(self._take_fresh_many(needed))

    def release_beyond(self, seq: Sequence, num_tokens: int) -> None:
        """Free `seq`'s blocks past those holding its first `num_tokens` tokens (a verification step's
        rejected proposals had slots there; nothing in them is cached)."""
        keep = cdiv(num_tokens, self.block_size)
        while len(seq.block_table) > keep:
            self._drop_reference(seq.block_table.pop())

    def commit_computed(self, seq: Sequence) -> None:
        """Register the hashes of `seq`'s full blocks whose K/V is now in the cache."""
        if self.shared_prefixes:
            self._register(seq)

    def _register(self, seq: Sequence) -> None:
        bs = self.block_size
        if seq.num_computed_tokens // bs <= len(seq.block_hashes):
            return   # no block became full: most steps
        for i in range(len(seq.block_hashes), seq.num_computed_tokens // bs):
            parent = seq.block_hashes[-1] if seq.block_hashes else chain_root(seq)
            tokens = tuple(seq.token_ids[i * bs:(i + 1) * bs])
            h = chain_hash(parent, tokens)
            block = self.blocks[seq.block_table[i]]
            if block.hash is None:   # a shared (hit) block is registered already
                block.hash, block.token_ids = h, tokens
                self.hash_to_block_id.setdefault(h, block.block_id)
            seq.block_hashes.append(h)

    # -- release -------------------------------------------------------------------------
    def deallocate(self, seq: Sequence, preempted: bool = False) -> None:
        """Drop `seq`'s references; blocks reaching zero go back to the free list (hash kept). A preempted
        sequence's computed blocks stay findable for its recompute (`shared_prefixes`)."""
        if preempted and not self.shared_prefixes:
            self._register(seq)
        blocks, free = self.blocks, self.free_block_ids
        for block_id in reversed(seq.block_table):   # _drop_reference, inline: once per block of every request
            block = blocks[block_id]
            assert block.ref_count > 0, f"block {block_id} freed twice"
            block.ref_count -= 1
            if block.ref_count == 0:
                free[block_id] = None
        seq.block_table.clear()
        seq.block_hashes.clear()
        seq.num_computed_tokens = 0

    def hold(self, block_ids: list[int]) -> None:
        """Take again the blocks a finished sequence just freed, contents and all, for a reader outside the
        engine (a decode worker pulling a prompt's KV); `release` gives them back."""
        for block_id in block_ids:
            self._take(block_id)

    def release(self, block_ids: list[int]) -> None:
        for block_id in reversed(block_ids):
            self._drop_reference(block_id)

    def _drop_reference(self, block_id: int) -> None:
        """One holder fewer; a block nobody holds goes back to the free list (its hash kept)."""
        block = self.blocks[block_id]
        assert block.ref_count > 0, f"block {block_id} freed twice"
        block.ref_count -= 1
        if block.ref_count == 0:
            self.free_block_ids[block_id] = None

    # -- internals -----------------------------------------------------------------------
    def _take(self, block_id: int) -> None:
        block = self.blocks[block_id]
        if block.ref_count == 0:
            del self.free_block_ids[block_id]
        block.ref_count += 1

    def _take_fresh_many(self, n: int) -> list[int]:
        """The `n` oldest-freed blocks, their cached contents forgotten, each held once."""
        free, blocks, table = self.free_block_ids, self.blocks, self.hash_to_block_id
        taken = []
        for _ in range(n):
            block_id, _ = free.popitem(last=False)
            block = blocks[block_id]
            if block.hash is not None:
                if table.get(block.hash) == block_id:
                    del table[block.hash]
                block.hash, block.token_ids = None, ()
            block.ref_count = 1
            taken.append(block_id)
        return taken
