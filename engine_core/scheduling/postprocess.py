"""After a step ran: advance the computed tokens, append the sampled ones, decide who finished.

The engine (tokens from the model) and the simulator (a placeholder token from a step-time
model) both call `postprocess`, so they cannot drift apart on when a request gets its first
token or finishes. Pure: ints and lists, no tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from engine_core.scheduling.sequence import Sequence
from engine_core.scheduling.strategies.base import ScheduledBatch, Scheduler


def samples_token(seq: Sequence, num_new_tokens: int) -> bool:
    """Does a step that computes `num_new_tokens` of `seq` produce a token? Only when it reaches the
    last token (a decode, a verification of proposals, or the chunk that ends a prompt); an earlier
    prefill chunk samples nothing."""
    return seq.num_computed_tokens + num_new_tokens == len(seq.token_ids) + len(seq.spec_token_ids)


@dataclass(frozen=True)
class StopRule:
    """What ends a sequence besides its SamplingParams: the tokenizer's end-of-sequence id and
    the engine's context limit (None: no such token or limit, as in the simulator)."""

    eos_id: int | None = None
    max_model_len: int | None = None

    def finish_reason(self, seq: Sequence, token: int) -> str | None:
        """"stop" (end-of-sequence or a stop token, once min_tokens were produced), "length"
        (max_tokens or the context limit reached), or None to go on. `token` is already appended."""
        params = seq.params
        produced = len(seq.token_ids) - seq.num_prompt_tokens   # seq.num_output_tokens, once per token: inlined
        if ((token == self.eos_id and not params.ignore_eos) or token in params.stop_token_ids) \
                and produced >= params.min_tokens:
            return "stop"
        if produced >= params.max_tokens or (self.max_model_len is not None and seq.num_tokens >= self.max_model_len):
            return "length"
        return None


class SampledToken(NamedTuple):   # a tuple: one is made per generated token
    seq: Sequence
    token: int
    finish_reason: str | None   # set: `seq` finished with this token and left the scheduler


def postprocess(scheduler: Scheduler, batch: ScheduledBatch, tokens: list[int | list[int] | None],
                stop: StopRule) -> list[SampledToken]:
    """Apply one step's results: `tokens[i]` is what `batch.seqs[i]` sampled (None: a prefill chunk;
    a list: a verification step's kept tokens, `_verified`).

    Each sequence's `num_new_tokens` become computed (their full blocks join the prefix cache);
    a sampled token is appended, and a finished sequence leaves the scheduler (blocks freed now).
    """
    sampled = []
    commit, finish_reason = scheduler.block_manager.commit_computed, stop.finish_reason
    for seq, n, token in zip(batch.seqs, batch.num_new_tokens, tokens):
        if isinstance(token, list):
            _verified(scheduler, seq, token, stop, sampled)
            continue
        seq.num_computed_tokens += n
        commit(seq)
        if token is None:
            continue
        seq.token_ids.append(token)
        reason = finish_reason(seq, token)
        if reason is not None:
            seq.finish_reason = reason
            scheduler.finish(seq)
        sampled.append(SampledToken(seq, token, reason))
    return sampled


def _verified(scheduler: Scheduler, seq: Sequence, kept: list[int], stop: StopRule, sampled: list) -> None:
    """A verification step kept `kept` (accepted proposals, then the target's own token): each is
    appended in turn as a decode would have (the first that finishes the sequence ends it); the
    fed positions that were kept are computed, and the KV blocks past them (the rejected
    proposals' slots) go back to the free list."""
    seq.spec_token_ids = []
    bm = scheduler.block_manager
    reason = None
    for token in kept:
        seq.token_ids.append(token)
        reason = stop.finish_reason(seq, token)
        if reason is not None:
            seq.finish_reason = reason
        sampled.append(SampledToken(seq, token, reason))
        if reason is not None:
            break
    seq.num_computed_tokens = len(seq.token_ids) - 1   # every token but the newest has its K/V
    bm.commit_computed(seq)
    if reason is not None:
        scheduler.finish(seq)
    else:
        bm.release_beyond(seq, seq.num_computed_tokens)
