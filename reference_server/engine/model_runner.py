"""The only place that builds tensors: the model, the KV cache, and each step's inputs.

`run(batch)` turns a scheduled batch into input ids, positions, cache slots and attention
groups (decodes first, then prefill chunks), runs one forward pass over all of the step's
tokens, and samples one token for every sequence whose step reaches its last token.
"""

from __future__ import annotations

import time

import torch

from calculators.architecture import ModelArchitecture
from reference_server.engine.config import DTYPE_BYTES, EngineConfig
from reference_server.engine.model import (AttentionGroup, AttentionMetadata, Transformer, init_random_weights,
                                    rope_tables)
from reference_server.engine.sampler import Sampler
from reference_server.scheduling.postprocess import samples_token
from reference_server.scheduling.sequence import Sequence
from reference_server.scheduling.strategies.base import ScheduledBatch

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def kv_block_bytes(arch: ModelArchitecture, dtype: str, block_size: int) -> int:
    """2 (K and V) x layers x kv_heads x head_dim x dtype bytes x block_size."""
    return 2 * arch.num_layers * arch.num_kv_heads * arch.head_dim * DTYPE_BYTES[dtype] * block_size


class ModelRunner:
    def __init__(self, arch: ModelArchitecture, config: EngineConfig, *, num_blocks: int,
                 max_model_len: int, sampler: Sampler, state_dict: dict[str, torch.Tensor] | None = None,
                 usable_vocab: int | None = None) -> None:
        if config.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device {config.device!r} requested but torch sees no CUDA device")
        if config.num_threads:
            torch.set_num_threads(config.num_threads)
        self.arch, self.config = arch, config
        self.device = torch.device(config.device)
        self.dtype = TORCH_DTYPES[config.dtype]
        self.block_size = config.block_size
        self.sampler = sampler
        self.usable_vocab = usable_vocab or arch.vocab_size
        with torch.device("meta"):
            model = Transformer(arch, max_model_len)
        model = model.to_empty(device=self.device)
        if state_dict is None:
            init_random_weights(model, config.seed)
        else:
            model.load_state_dict(state_dict, strict=True)
        self.model = model.to(self.dtype).eval()
        cos, sin = rope_tables(arch.head_dim, max_model_len, arch.rope_theta)   # kept in float32
        self.model.rope_cos, self.model.rope_sin = cos.to(self.device), sin.to(self.device)
        # [layers, 2 (K, V), kv_heads, slots, head_dim]: one preallocated tensor, slot = block * bs + offset
        self.kv_cache = torch.zeros(arch.num_layers, 2, arch.num_kv_heads, num_blocks * config.block_size,
                                    arch.head_dim, dtype=self.dtype, device=self.device)
        self.num_blocks = num_blocks
        self.last_forward_s = 0.0

    @property
    def kv_cache_bytes(self) -> int:
        return self.kv_cache.nbytes

    # -- one step ------------------------------------------------------------------------
    @torch.inference_mode()
    def run(self, batch: ScheduledBatch) -> list[int | None]:
        """One forward pass; returns the sampled token per sequence (None: mid-prefill chunk)."""
        logits, sample_seqs = self.forward(batch)
        sampled = dict(zip(map(id, sample_seqs), self.sampler(logits, sample_seqs))) if sample_seqs else {}
        return [sampled.get(id(seq)) for seq in batch.seqs]

    @torch.inference_mode()
    def forward(self, batch: ScheduledBatch) -> tuple[torch.Tensor, list[Sequence]]:
        """Logits [N, usable vocab] of the N sequences whose step reaches their last token."""
        order = sorted(range(len(batch.seqs)), key=lambda i: batch.num_new_tokens[i] > 1)  # decodes first
        seqs = [batch.seqs[i] for i in order]
        counts = [batch.num_new_tokens[i] for i in order]
        input_ids, positions, meta = self._prepare(seqs, counts)
        sample_rows, sample_seqs, end = [], [], 0
        for seq, n in zip(seqs, counts):
            end += n
            if samples_token(seq, n):
                sample_rows.append(end - 1)
                sample_seqs.append(seq)
        start = time.perf_counter()
        hidden = self.model(input_ids, positions, self.kv_cache, meta)
        rows = torch.tensor(sample_rows, dtype=torch.long, device=self.device)
        logits = self.model.compute_logits(hidden[rows])[:, : self.usable_vocab]
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.last_forward_s = time.perf_counter() - start
        return logits, sample_seqs

    def _prepare(self, seqs: list[Sequence], counts: list[int]):
        """Flattened step inputs plus one attention group per query length class."""
        bs = self.block_size
        ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        for seq, n in zip(seqs, counts):
            start = seq.num_computed_tokens
            ids.extend(seq.token_ids[start:start + n])
            positions.extend(range(start, start + n))
            table = seq.block_table
            slots.extend(table[p // bs] * bs + p % bs for p in range(start, start + n))
        num_decodes = sum(1 for n in counts if n == 1)
        groups = []
        if num_decodes:
            groups.append(self._group(seqs[:num_decodes], counts[:num_decodes], 0,
                                      covers_step=num_decodes == len(seqs)))
        if num_decodes < len(seqs):
            groups.append(self._group(seqs[num_decodes:], counts[num_decodes:], num_decodes,
                                      covers_step=False))
        to = dict(device=self.device, dtype=torch.long)
        meta = AttentionMetadata(slot_mapping=torch.tensor(slots, **to), groups=groups)
        return torch.tensor(ids, **to), torch.tensor(positions, **to), meta

    def _group(self, seqs: list[Sequence], counts: list[int], first_token: int, *,
               covers_step: bool) -> AttentionGroup:
        bs = self.block_size
        batch, q_len = len(seqs), max(counts)
        context = [seq.num_computed_tokens + n for seq, n in zip(seqs, counts)]
        key_len = max(context)
        max_blocks = -(-key_len // bs)
        # [B, max_blocks] block tables (padding: block 0, masked) -> [B, L] slots
        tables = torch.tensor([seq.block_table[:max_blocks] + [0] * (max_blocks - len(seq.block_table[:max_blocks]))
                               for seq in seqs], dtype=torch.long)
        key_slots = (tables.unsqueeze(2) * bs + torch.arange(bs)).view(batch, -1)[:, :key_len]
        # query i of sequence b sits at position first_pos[b] + i and sees keys 0..that position
        first_pos = torch.tensor([seq.num_computed_tokens for seq in seqs]).view(batch, 1, 1)
        key_pos = torch.arange(key_len).view(1, 1, key_len)
        query_pos = first_pos + torch.arange(q_len).view(1, q_len, 1)              # [B, Q, 1]
        visible = key_pos <= query_pos                                               # [B, Q, L]
        bias = torch.zeros(batch, q_len, key_len).masked_fill_(~visible, float("-inf"))
        count_t = torch.tensor(counts)
        valid = torch.arange(q_len).unsqueeze(0) < count_t.unsqueeze(1)               # [B, Q]
        offsets = torch.cumsum(count_t, 0) - count_t + first_token
        token_index = torch.where(valid, offsets.unsqueeze(1) + torch.arange(q_len), first_token)
        out_index = None if bool(valid.all()) else valid.flatten().nonzero().squeeze(1)
        to = dict(device=self.device)
        return AttentionGroup(
            token_index=token_index.to(**to), key_slots=key_slots.flatten().to(**to),
            bias=bias.unsqueeze(1).to(device=self.device, dtype=self.dtype),
            out_index=None if out_index is None else out_index.to(**to), covers_step=covers_step,
        )
