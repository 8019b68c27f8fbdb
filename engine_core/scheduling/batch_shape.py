"""What a scheduled batch costs to run, in the terms a step-time model uses. Pure: ints only.

    prefill_tokens = tokens of the sequences that are not plain decodes (a prompt, a prefill
                     chunk, a preempted sequence being recomputed)
    decode_seqs    = sequences computing exactly their next token (with speculative decoding: their
                     last token and its proposals, verified in one pass)
    context_tokens = sum over the batch of the tokens each attends once the step is done
    proposal_tokens = speculative decoding's proposals verified this step (the tokens a decode
                     feeds beyond its one), and proposing_seqs the sequences that fed any
    lora_adapters  = distinct LoRA adapters in the batch (each adds its own low-rank products), and
    lora_tokens    = the tokens of sequences with an adapter (each goes through its adapter's products)

Read before `postprocess` advances the batch. The engine's step record and the simulator's step
clock both count with this, so a model fitted on the one replays on the other.
"""

from __future__ import annotations

from typing import NamedTuple

from engine_core.scheduling.strategies.base import ScheduledBatch


class BatchShape(NamedTuple):
    sequences: int
    prefill_tokens: int
    decode_seqs: int
    context_tokens: int
    proposal_tokens: int = 0
    proposing_seqs: int = 0
    lora_adapters: int = 0
    lora_tokens: int = 0


def batch_shape(batch: ScheduledBatch) -> BatchShape:
    prefill = context = decodes = proposals = proposing = 0
    adapters = set()
    lora_tokens = 0
    for seq, count in zip(batch.seqs, batch.num_new_tokens):
        if seq.lora is not None:
            adapters.add(seq.lora)
            lora_tokens += count
        computed = seq.num_computed_tokens
        context += computed + count
        if (count > 1 and not seq.spec_token_ids) or computed < seq.num_prompt_tokens:
            prefill += count
        else:
            decodes += 1
            if count > 1:
                proposals += count - 1
                proposing += 1
    return BatchShape(len(batch.seqs), prefill, decodes, context, proposals, proposing, len(adapters), lora_tokens)
