"""Attention over the paged KV cache at each sequence's real length (the model runner's helper).

Shapes: T = tokens in the step, H = query heads, K = KV heads, G = H // K, d = head_dim,
S = cache slots. One layer's cache is `[2, K, S, d]`; slot = block * block_size + offset.

A step's tokens come decodes first, sorted by context length, then one prefill chunk after
another. `plan_attention` turns that layout into `AttentionCall`s, built once per step and
run in every layer:

- decodes: the sorted contexts are cut into length buckets (`bucket_bounds`); each bucket
  gathers its keys/values once per layer into `[2, K, b, L, d]` (L = the bucket's longest
  context) and runs one `scaled_dot_product_attention` with queries `[K, b, G, d]`: a KV
  head's G query heads are its "query length", so GQA repeats no keys. Only a bucket whose
  lengths differ carries a padding mask. One rectangle for the whole batch pays for the
  longest context in every row; one call per sequence pays a call per row: the cut
  minimises padded key tokens + `overhead_tokens` per call (measured by
  `python -m lab.reference_server.attention`).
- a prefill chunk: one SDPA call, queries `[1, H, Q, d]` over keys `[1, K, L, d]`
  (`enable_gqa`), causal; with cached tokens before the chunk (L > Q) the causal mask is
  offset, so it is given explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

# One more SDPA call (its gather, mask and launch) costs about this many bytes of key/value
# traffic on the CPU this was measured on (python -m lab.reference_server.attention):
# ~60 key tokens of the `small` preset in float32 (2 KiB of K and V per token and layer).
CALL_OVERHEAD_BYTES = 32 * 1024


@dataclass(frozen=True)
class AttentionCall:
    """One SDPA call: the step's query rows `[start, stop)` against `batch` x `key_len` keys.

    key_slots: [batch * key_len] cache slot of every key (padding repeats a valid slot).
    mask: decode bucket `[1, batch, 1, key_len]` additive (0 / -inf) or None when its lengths
          are equal; prefill `[Q, key_len]` boolean (True = visible) or None when causal
          from position 0 (`is_causal`).
    """

    start: int
    stop: int
    batch: int
    key_len: int
    key_slots: torch.Tensor
    mask: torch.Tensor | None
    decode: bool


@dataclass
class StepAttention:
    """Everything attention needs for one step, shared by every layer.

    workspace: flat buffer the calls gather keys/values into, one after another (or None: a
    fresh tensor each time). Reused, because a fresh gather of tens of MB is a fresh mmap
    whose page faults cost as much as the copy."""

    slot_mapping: torch.Tensor        # [T] cache slot each new token's K/V is written to
    calls: list[AttentionCall]        # in step order: their rows concatenate to [0, T)
    workspace: torch.Tensor | None = None

    def attend(self, q: torch.Tensor, kv_layer: torch.Tensor) -> torch.Tensor:
        """q: [T, H, d] (rotary applied), kv_layer: [2, K, S, d] holding this step's K/V -> [T, H * d]."""
        outs = []
        for call in self.calls:
            kv = gather_keys(kv_layer, call.key_slots, self.workspace)                         # [2, K, b * L, d]
            attention = decode_attention if call.decode else prefill_attention
            outs.append(attention(q[call.start:call.stop], kv, call))
        return outs[0] if len(outs) == 1 else torch.cat(outs)


def gather_keys(kv_layer: torch.Tensor, slots: torch.Tensor, workspace: torch.Tensor | None) -> torch.Tensor:
    """[2, K, S, d] -> [2, K, len(slots), d], into `workspace` when given."""
    if workspace is None:
        return kv_layer.index_select(2, slots)
    shape = (2, kv_layer.shape[1], slots.numel(), kv_layer.shape[3])
    return torch.index_select(kv_layer, 2, slots, out=workspace[:shape[0] * shape[1] * shape[2] * shape[3]].view(shape))


def decode_attention(q: torch.Tensor, kv: torch.Tensor, call: AttentionCall) -> torch.Tensor:
    """q: [b, H, d] one query per sequence, kv: [2, K, b * L, d] -> [b, H * d]."""
    num_kv_heads, head_dim = kv.shape[1], kv.shape[3]
    batch, num_heads = q.shape[0], q.shape[1]
    qg = q.view(batch, num_kv_heads, num_heads // num_kv_heads, head_dim).transpose(0, 1)   # [K, b, G, d]
    k, v = kv.view(2, num_kv_heads, batch, call.key_len, head_dim)
    out = F.scaled_dot_product_attention(qg, k, v, attn_mask=call.mask)                     # [K, b, G, d]
    return out.transpose(0, 1).reshape(batch, num_heads * head_dim)


def prefill_attention(q: torch.Tensor, kv: torch.Tensor, call: AttentionCall) -> torch.Tensor:
    """q: [Q, H, d] one sequence's chunk, kv: [2, K, L, d] -> [Q, H * d]."""
    q_len, num_heads, head_dim = q.shape
    k, v = kv.unsqueeze(1)                                                                    # [1, K, L, d] each
    out = F.scaled_dot_product_attention(q.transpose(0, 1).unsqueeze(0), k, v, attn_mask=call.mask,
                                         is_causal=call.mask is None, enable_gqa=True)          # [1, H, Q, d]
    return out[0].transpose(0, 1).reshape(q_len, num_heads * head_dim)


def bucket_bounds(contexts: list[int], overhead_tokens: float) -> list[tuple[int, int]]:
    """Cut ascending `contexts` into runs `[(start, stop), ...]` minimising
    sum(run length x its longest context) + overhead_tokens x runs (exact, O(n^2) dynamic programme;
    one run when padding costs less than one more call)."""
    n = len(contexts)
    if n == 0:
        return []
    if n * contexts[-1] - sum(contexts) <= overhead_tokens:
        return [(0, n)]
    best = [0.0] + [float("inf")] * n        # best[j]: cheapest cut of contexts[:j]
    cut = [0] * (n + 1)
    for stop in range(1, n + 1):
        longest = contexts[stop - 1]
        for start in range(stop):
            cost = best[start] + (stop - start) * longest + overhead_tokens
            if cost < best[stop]:
                best[stop], cut[stop] = cost, start
    bounds, stop = [], n
    while stop:
        bounds.append((cut[stop], stop))
        stop = cut[stop]
    return bounds[::-1]


def overhead_tokens_for(num_kv_heads: int, head_dim: int, dtype_bytes: int) -> float:
    """`CALL_OVERHEAD_BYTES` in key tokens of this model (K and V of one token in one layer)."""
    return CALL_OVERHEAD_BYTES / (2 * num_kv_heads * head_dim * dtype_bytes)


class AttentionPlanner:
    """Builds each step's `StepAttention` from the sequences' block tables.

    `overhead_tokens` sets the decode bucketing (see `bucket_bounds`): inf = one padded
    rectangle, 0 = one call per distinct length. `kv_token_elements`: elements of one key
    token's K and V in one layer (2 x K x d), to size the gather workspace; 0 = no workspace."""

    def __init__(self, block_size: int, device: torch.device, dtype: torch.dtype, overhead_tokens: float,
                 kv_token_elements: int = 0) -> None:
        self.block_size = block_size
        self.device = device
        self.dtype = dtype
        self.overhead_tokens = overhead_tokens
        self.kv_token_elements = kv_token_elements
        self._workspace: torch.Tensor | None = None

    def plan(self, block_tables: list[list[int]], starts: list[int], counts: list[int], num_decodes: int) -> StepAttention:
        """Sequence i computes tokens [starts[i], starts[i] + counts[i]); the first `num_decodes`
        (counts 1) come in ascending context order."""
        bs = self.block_size
        slots = []
        for table, start, n in zip(block_tables, starts, counts):
            slots.extend(table[p // bs] * bs + p % bs for p in range(start, start + n))
        calls = []
        contexts = [start + 1 for start in starts[:num_decodes]]
        for lo, hi in bucket_bounds(contexts, self.overhead_tokens):
            calls.append(self._decode_call(block_tables[lo:hi], contexts[lo:hi], lo))
        row = num_decodes
        for table, start, n in zip(block_tables[num_decodes:], starts[num_decodes:], counts[num_decodes:]):
            calls.append(self._prefill_call(table, start, n, row))
            row += n
        return StepAttention(torch.tensor(slots, dtype=torch.long, device=self.device), calls,
                             self._workspace_for(max((c.batch * c.key_len for c in calls), default=0)))

    def _workspace_for(self, key_tokens: int) -> torch.Tensor | None:
        """A buffer for `key_tokens` keys' K and V, grown (by half again) when a step needs more."""
        if not self.kv_token_elements:
            return None
        needed = key_tokens * self.kv_token_elements
        if self._workspace is None or self._workspace.numel() < needed:
            self._workspace = torch.empty(needed * 3 // 2, dtype=self.dtype, device=self.device)
        return self._workspace

    def _key_slots(self, tables: list[list[int]], key_len: int) -> torch.Tensor:
        """[b * key_len] slots of keys 0..key_len-1 of each table (past a table's end: its block 0)."""
        bs = self.block_size
        num_blocks = -(-key_len // bs)
        padded = [table[:num_blocks] + [table[0]] * (num_blocks - len(table[:num_blocks])) for table in tables]
        slots = torch.tensor(padded, dtype=torch.long).unsqueeze(2) * bs + torch.arange(bs)
        return slots.view(len(tables), -1)[:, :key_len].flatten().to(self.device)

    def _decode_call(self, tables: list[list[int]], contexts: list[int], row: int) -> AttentionCall:
        batch, key_len = len(contexts), contexts[-1]
        mask = None
        if contexts[0] != key_len:
            visible = torch.arange(key_len).unsqueeze(0) < torch.tensor(contexts).unsqueeze(1)   # [b, L]
            mask = torch.zeros(batch, key_len).masked_fill_(~visible, float("-inf"))
            mask = mask.view(1, batch, 1, key_len).to(device=self.device, dtype=self.dtype)
        return AttentionCall(row, row + batch, batch, key_len, self._key_slots(tables, key_len), mask, decode=True)

    def _prefill_call(self, table: list[int], start: int, n: int, row: int) -> AttentionCall:
        key_len = start + n
        mask = None
        if start:   # query i sits at position start + i and sees keys 0..start + i
            mask = torch.arange(key_len, device=self.device).unsqueeze(0) <= \
                torch.arange(start, key_len, device=self.device).unsqueeze(1)                  # [Q, L]
        return AttentionCall(row, row + n, 1, key_len, self._key_slots([table], key_len), mask, decode=False)
