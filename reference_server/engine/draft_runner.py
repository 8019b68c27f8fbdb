"""The draft model of speculative decoding (`--speculative-method draft`): it writes each step's proposals.

    DraftRunner(arch, config, num_blocks=..., max_model_len=..., state_dict=...).propose(batch)

The draft is a second, smaller model with the target's tokenizer, its own weights and its own KV
cache, laid out like the target's: the same block tables, so a sequence's position p has its
draft K/V in the slot where the target keeps its own. Before the target's pass, for the step's
batch (`propose`):
  1. one pass over every sequence's tokens the draft has not seen: a prefill chunk's, the tokens
     the last verification kept, and a decoding sequence's last token; its greedy token after the
     last one is a proposing sequence's first proposal;
  2. one decode pass per further proposal, over the proposing sequences only.
The scheduler has made room for them (`scheduling.speculative.DraftSlots`), and the draft's own
K/V of each proposal lands in that room. The draft has seen a sequence up to the tokens the target
kept (`min(draft's count, target's computed)`): the K/V of a rejected proposal is overwritten by
the kept token at the same position on the next pass, and a preempted sequence starts again with
the target. A sequence new to the draft starts from its first token, even where the target's
prefix cache spares it the prompt: the draft's K/V in a shared block may lack the last
proposal of the sequence that filled it, which the draft never feeds. Proposals are greedy (the draft's argmax): a one-hot draft distribution, which the
target's rejection sampling takes as it is (`engine.sampler`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine_core.architecture import ModelArchitecture
from reference_server.engine.config import EngineConfig
from reference_server.engine.model_runner import ModelRunner
from engine_core.scheduling.strategies.base import ScheduledBatch


@dataclass
class _DraftView:
    """What the model runner reads of a sequence, as the draft sees it this pass."""

    token_ids: list[int]
    num_computed_tokens: int
    block_table: list[int]
    spec_token_ids: list[int] = field(default_factory=list)


class DraftRunner:
    def __init__(self, arch: ModelArchitecture, config: EngineConfig, *, num_blocks: int, max_model_len: int,
                 state_dict: dict | None, usable_vocab: int) -> None:
        self.runner = ModelRunner(arch, config, num_blocks=num_blocks, max_model_len=max_model_len, sampler=None,
                                  state_dict=state_dict, usable_vocab=usable_vocab)
        self._seen: dict[str, int] = {}   # request id -> positions whose draft K/V is in the cache

    @property
    def kv_cache_bytes(self) -> int:
        return self.runner.kv_cache_bytes

    def forget(self, request_id: str) -> None:
        self._seen.pop(request_id, None)

    @torch.inference_mode()
    def propose(self, batch: ScheduledBatch) -> None:
        """Write the draft's greedy tokens into each proposing sequence's `spec_token_ids` (its places)."""
        views, counts, proposing = [], [], []
        for seq, n in zip(batch.seqs, batch.num_new_tokens):
            computed = seq.num_computed_tokens
            start = min(self._seen.get(seq.request_id, 0), computed)
            places = len(seq.spec_token_ids)
            end = computed + n - places   # the target's tokens fed this step (the proposals aside)
            views.append(_DraftView(seq.token_ids[:end], start, seq.block_table))
            counts.append(end - start)
            self._seen[seq.request_id] = end
            if places:
                proposing.append((seq, len(views) - 1))
        proposals: dict[int, list[int]] = {id(seq): [] for seq, _ in proposing}
        logits, fed = self.runner.forward(ScheduledBatch(seqs=views, num_new_tokens=counts))
        row_of = {id(view): row for row, view in enumerate(fed)}
        tokens = logits.argmax(dim=-1).tolist() if len(fed) else []
        for seq, i in proposing:
            proposals[id(seq)].append(tokens[row_of[id(views[i])]])
        for step in range(1, max((len(seq.spec_token_ids) for seq, _ in proposing), default=0)):
            going = [(seq, views[i]) for seq, i in proposing if len(seq.spec_token_ids) > step]
            pass_views = []
            for seq, view in going:   # feed the previous proposal at the next position
                view.token_ids = view.token_ids + [proposals[id(seq)][-1]]
                view.num_computed_tokens = len(view.token_ids) - 1
                pass_views.append(view)
                self._seen[seq.request_id] = len(view.token_ids)
            logits, _ = self.runner.forward(ScheduledBatch(seqs=pass_views, num_new_tokens=[1] * len(pass_views)))
            for (seq, _), token in zip(going, logits.argmax(dim=-1).tolist()):
                proposals[id(seq)].append(token)
        for seq, _ in proposing:
            seq.spec_token_ids = proposals[id(seq)]
