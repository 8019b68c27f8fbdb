"""The only place that builds tensors: the model, the KV cache, and each step's inputs.

`run(batch)` turns a scheduled batch into input ids, positions, cache slots and an attention
plan (decodes first, by context length, then prefill chunks: `engine.attention`), runs one
forward pass over all of the step's tokens, and samples one token for every sequence whose
step reaches its last token.
"""

from __future__ import annotations

import time

import torch

from engine_core.architecture import ModelArchitecture
from reference_server.engine.config import DTYPE_BYTES, EngineConfig
from reference_server.engine.attention import AttentionPlanner, overhead_tokens_for
from reference_server.engine.model import Transformer, init_random_weights, rope_tables
from reference_server.engine.sampler import Sampler
from engine_core.scheduling.postprocess import samples_token
from engine_core.scheduling.sequence import Sequence
from engine_core.scheduling.speculative import AcceptanceDraws
from engine_core.scheduling.strategies.base import ScheduledBatch

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def kv_block_bytes(arch: ModelArchitecture, dtype: str, block_size: int) -> int:
    """2 (K and V) x layers x kv_heads x head_dim x dtype bytes x block_size."""
    return 2 * arch.num_layers * arch.num_kv_heads * arch.head_dim * DTYPE_BYTES[dtype] * block_size


class ModelRunner:
    def __init__(self, arch: ModelArchitecture, config: EngineConfig, *, num_blocks: int,
                 max_model_len: int, sampler: Sampler, state_dict: dict[str, torch.Tensor] | None = None,
                 usable_vocab: int | None = None, acceptance: AcceptanceDraws | None = None) -> None:
        if config.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device {config.device!r} requested but torch sees no CUDA device")
        if config.num_threads:
            torch.set_num_threads(config.num_threads)
        self.arch, self.config = arch, config
        self.device = torch.device(config.device)
        self.dtype = TORCH_DTYPES[config.dtype]
        self.block_size = config.block_size
        self.sampler = sampler
        self.acceptance = acceptance   # emulated acceptance (speculative decoding); None: exact
        self.usable_vocab = usable_vocab or arch.vocab_size
        with torch.device("meta"):
            model = Transformer(arch, max_model_len)
        model = model.to_empty(device=self.device)
        if state_dict is None:
            init_random_weights(model, config.seed)
        else:
            model.load_state_dict(state_dict, strict=True)
        self.model = model.to(self.dtype).eval()
        if config.quantization is not None:
            from reference_server.engine.quantization import quantize_model

            quantize_model(self.model, config.quantization)
        cos, sin = rope_tables(arch.head_dim, max_model_len, arch.rope_theta)   # kept in float32
        self.model.rope_cos, self.model.rope_sin = cos.to(self.device), sin.to(self.device)
        # [layers, 2 (K, V), kv_heads, slots, head_dim]: one preallocated tensor, slot = block * bs + offset
        self.kv_cache = torch.zeros(arch.num_layers, 2, arch.num_kv_heads, num_blocks * config.block_size,
                                    arch.head_dim, dtype=self.dtype, device=self.device)
        self.num_blocks = num_blocks
        self.attention_planner = AttentionPlanner(
            config.block_size, self.device, self.dtype,
            overhead_tokens_for(arch.num_kv_heads, arch.head_dim, DTYPE_BYTES[config.dtype]),
            kv_token_elements=2 * arch.num_kv_heads * arch.head_dim)
        self.last_forward_s = 0.0
        self.lora = None   # reference_server.engine.lora.LoraBank, set by the engine with --enable-lora

    @property
    def kv_cache_bytes(self) -> int:
        return self.kv_cache.nbytes

    @property
    def weight_bytes(self) -> int:
        """What the weights take in memory, quantized ones as stored (rows and scales)."""
        from reference_server.engine.quantization import weight_bytes

        return weight_bytes(self.model)

    @property
    def num_threads(self) -> int:
        """The torch CPU threads this process's steps run on (global to the process)."""
        return torch.get_num_threads()

    # -- one step ------------------------------------------------------------------------
    @torch.inference_mode()
    def run(self, batch: ScheduledBatch) -> list[int | list[int] | None]:
        """One forward pass; returns the sampled token per sequence (None: mid-prefill chunk; a list:
        a verification step's kept tokens, `_verify`)."""
        logits, sample_seqs = self.forward(batch)
        if not any(seq.spec_token_ids for seq in sample_seqs):   # one row a sequence: no speculation this step
            sampled = dict(zip(map(id, sample_seqs), self.sampler(logits, sample_seqs))) if sample_seqs else {}
            return [sampled.get(id(seq)) for seq in batch.seqs]
        first, row = [], 0
        for seq in sample_seqs:
            first.append(row)
            row += len(seq.spec_token_ids) + 1
        plain = [i for i, seq in enumerate(sample_seqs) if not seq.spec_token_ids]
        sampled = {}
        if plain:
            tokens = self.sampler(logits[torch.tensor([first[i] for i in plain])], [sample_seqs[i] for i in plain])
            sampled = {id(sample_seqs[i]): token for i, token in zip(plain, tokens)}
        for i, seq in enumerate(sample_seqs):
            if seq.spec_token_ids:   # the target's distribution after the last token and each proposal
                rows = logits[first[i]:first[i] + len(seq.spec_token_ids) + 1]
                sampled[id(seq)] = self._verify(rows, seq)
        return [sampled.get(id(seq)) for seq in batch.seqs]

    def _verify(self, rows: torch.Tensor, seq: Sequence) -> list[int]:
        """Exact acceptance (`Sampler.verify`), or with emulated acceptance the draws' count of proposals
        and then the target's own token after the last one kept."""
        proposals = seq.spec_token_ids
        if self.acceptance is None:
            return self.sampler.verify(rows, seq, proposals)
        kept = self.acceptance.accepted(len(proposals))
        return proposals[:kept] + self.sampler(rows[kept:kept + 1], [seq])

    @torch.inference_mode()
    def forward(self, batch: ScheduledBatch) -> tuple[torch.Tensor, list[Sequence]]:
        """Logits of the sequences whose step reaches their last token (batch order): one row each,
        or one per fed position (its last token and each proposal) for a verification step."""
        order = self.step_order(batch)
        seqs = [batch.seqs[i] for i in order]
        counts = [batch.num_new_tokens[i] for i in order]
        starts = [seq.num_computed_tokens for seq in seqs]
        ids: list[int] = []
        for seq, start, n in zip(seqs, starts, counts):
            ids.extend((seq.token_ids + seq.spec_token_ids if seq.spec_token_ids else seq.token_ids)[start:start + n])
        positions = [p for start, n in zip(starts, counts) for p in range(start, start + n)]
        num_decodes = next((i for i, n in enumerate(counts) if n != 1), len(counts))   # decodes lead
        meta = self.attention_planner.plan([seq.block_table for seq in seqs], starts, counts, num_decodes)
        last_row = {}
        end = 0
        for i, n in zip(order, counts):
            end += n
            last_row[i] = end - 1
        sample_rows, sample_seqs = [], []
        for i, (seq, n) in enumerate(zip(batch.seqs, batch.num_new_tokens)):
            if samples_token(seq, n):
                k = len(seq.spec_token_ids)
                sample_rows.extend(range(last_row[i] - k, last_row[i] + 1))
                sample_seqs.append(seq)
        to = dict(device=self.device, dtype=torch.long)
        start = time.perf_counter()
        if self.lora is not None:   # each row's adapter, in step order: the slots' segments
            self.lora.prepare([seq.lora for seq, n in zip(seqs, counts) for _ in range(n)], self.device)
        hidden = self.model(torch.tensor(ids, **to), torch.tensor(positions, **to), self.kv_cache, meta)
        logits = self.model.compute_logits(hidden[torch.tensor(sample_rows, **to)])[:, : self.usable_vocab]
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.last_forward_s = time.perf_counter() - start
        return logits, sample_seqs

    @staticmethod
    def step_order(batch: ScheduledBatch) -> list[int]:
        """Indices of `batch.seqs` in step order: decodes (one new token) by ascending context,
        so that length buckets are runs of rows, then prefill chunks in batch order."""
        decodes = sorted((i for i, n in enumerate(batch.num_new_tokens) if n == 1),
                         key=lambda i: batch.seqs[i].num_computed_tokens)
        return decodes + [i for i, n in enumerate(batch.num_new_tokens) if n != 1]
