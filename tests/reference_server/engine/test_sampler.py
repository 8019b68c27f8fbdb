"""Speculative decoding's acceptance in the sampler: kept tokens are distributed as the target samples them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from reference_server.engine.sampler import Sampler
from engine_core.scheduling.sampling import SamplingParams
from engine_core.scheduling.sequence import Sequence

P_FIRST = torch.tensor([0.1, 0.5, 0.2, 0.15, 0.05])
P_SECOND = torch.tensor([0.3, 0.1, 0.1, 0.2, 0.3])
P_BONUS = torch.tensor([0.2, 0.2, 0.2, 0.2, 0.2])


def _verify_many(proposals: list[int], trials: int) -> list[list[int]]:
    sampler = Sampler(seed=0, eos_id=None)
    seq = Sequence("r", [1, 2, 3], SamplingParams(max_tokens=10, temperature=1.0, seed=11), arrival_time=0.0)
    logits = torch.stack([P_FIRST, P_SECOND, P_BONUS]).log()[: len(proposals) + 1]
    return [sampler.verify(logits, seq, proposals) for _ in range(trials)]


def _chi_square_p(observed: list[int], expected: torch.Tensor) -> float:
    counts = np.bincount(observed, minlength=len(expected))
    shares = expected.double().numpy()
    assert counts[shares == 0].sum() == 0   # nothing drawn that has no chance
    kept = shares > 0
    return stats.chisquare(counts[kept], shares[kept] / shares.sum() * len(observed)).pvalue


@pytest.mark.parametrize("proposals", [[1, 3], [4, 0]])   # a likely proposal and an unlikely one
def test_rejection_sampling_keeps_each_token_distributed_as_the_targets_own_sampling(proposals):
    kept = _verify_many(proposals, 8_000)
    first = [tokens[0] for tokens in kept]
    assert _chi_square_p(first, P_FIRST) > 1e-3
    assert np.mean([tokens[0] == proposals[0] for tokens in kept]) == pytest.approx(float(P_FIRST[proposals[0]]), abs=0.02)
    after_kept = [tokens[1] for tokens in kept if tokens[0] == proposals[0]]   # the next position, given the first kept
    assert len(after_kept) > 200 and _chi_square_p(after_kept, P_SECOND) > 1e-3
    assert all(len(tokens) == 3 for tokens in kept if tokens[:2] == proposals)   # all kept: a bonus token more


def test_with_top_p_a_proposal_outside_the_nucleus_is_never_kept_and_tokens_follow_the_nucleus():
    sampler = Sampler(seed=0, eos_id=None)
    seq = Sequence("t", [1, 2], SamplingParams(max_tokens=10, temperature=1.0, top_p=0.7, seed=5), arrival_time=0.0)
    logits = torch.stack([P_FIRST, P_SECOND]).log()
    kept = [sampler.verify(logits, seq, [3]) for _ in range(8_000)]   # token 3 lies outside the 0.7 nucleus {1, 2}
    first = [tokens[0] for tokens in kept]
    assert 3 not in first and all(len(tokens) == 1 for tokens in kept)
    assert _chi_square_p(first, torch.tensor([0.0, 0.5, 0.2, 0.0, 0.0])) > 1e-3


def test_greedy_verification_keeps_what_the_argmax_agrees_with():
    sampler = Sampler(seed=0, eos_id=None)
    seq = Sequence("g", [1], SamplingParams(max_tokens=5, temperature=0.0), arrival_time=0.0)
    logits = torch.stack([P_FIRST, P_SECOND, P_BONUS]).log()
    assert sampler.verify(logits, seq, [1, 0]) == [1, 0, 0]
    assert sampler.verify(logits, seq, [1, 4]) == [1, 0]
    assert sampler.verify(logits, seq, [2, 0]) == [1]
