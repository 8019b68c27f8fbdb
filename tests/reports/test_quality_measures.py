"""The quality measures: agreement, KL, the bootstrap interval over prompts, perplexity."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from reports.quality.measures import (kl_divergence, perplexity, positional_agreement, prefix_agreement, summarize,
                                      top_logprob_kl)


def test_prefix_agreement_counts_positions_before_the_first_divergence():
    assert prefix_agreement([1, 2, 3, 4], [1, 2, 3, 4]) == 1.0
    assert prefix_agreement([1, 2, 3, 4], [1, 2, 9, 4]) == 0.5
    assert prefix_agreement([5, 2, 3, 4], [1, 2, 3, 4]) == 0.0
    assert prefix_agreement([1, 2], [1, 2, 3, 4]) == 0.5   # the shorter ended: a divergence
    assert prefix_agreement([], []) == 1.0


def test_positional_agreement_counts_every_matching_position():
    assert positional_agreement([1, 2, 3, 4], [1, 9, 3, 4]) == 0.75
    assert positional_agreement([1, 2], [1, 2, 3, 4]) == 0.5


def test_kl_matches_scipy_entropy_and_is_zero_for_the_same_distribution():
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(6), size=3), rng.dirichlet(np.ones(6), size=3)
    got = kl_divergence(np.log(p), np.log(q))
    assert got == pytest.approx([stats.entropy(pi, qi) for pi, qi in zip(p, q)], rel=1e-9)
    assert kl_divergence(np.log(p), np.log(p)) == pytest.approx(np.zeros(3), abs=1e-12)
    p0 = np.array([[0.5, 0.5, 0.0]])   # no mass where A puts none: that term is 0, not nan
    with np.errstate(divide="ignore"):
        logp0 = np.log(p0)
    assert kl_divergence(logp0, np.log(np.array([[0.25, 0.25, 0.5]]))) == pytest.approx([math.log(2)])
    with pytest.raises(ValueError, match="shape"):
        kl_divergence(np.zeros((2, 3)), np.zeros((2, 4)))


def test_top_logprob_kl_renormalizes_over_the_listed_tokens():
    same = {"a": math.log(0.6), "b": math.log(0.3)}
    assert top_logprob_kl(same, dict(same)) == pytest.approx(0.0, abs=1e-12)
    shifted = {"a": math.log(0.3), "b": math.log(0.6)}
    p = np.array([2 / 3, 1 / 3])
    assert top_logprob_kl(same, shifted) == pytest.approx(stats.entropy(p, p[::-1]))
    assert top_logprob_kl({"a": 0.0, "z": -1.0}, {"a": 0.0, "b": -3.0}) > 0   # z missing: B's floor


def test_summarize_gives_the_mean_and_an_interval_that_holds_it():
    values = [0.9, 0.95, 1.0, 0.7, 0.85, 0.99, 0.8, 0.92]
    s = summarize(values, seed=1)
    assert s["mean"] == pytest.approx(np.mean(values)) and s["n"] == 8
    low, high = s["ci95"]
    assert low < s["mean"] < high and high - low < 0.2
    assert summarize(values, seed=1) == s   # seeded
    assert summarize([1.0, 1.0, 1.0]) == {"mean": 1.0, "ci95": [1.0, 1.0], "n": 3}
    assert summarize([None, 0.5])["n"] == 1
    assert summarize([]) == {"mean": None, "ci95": None, "n": 0}


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size():
    vocab, tokens = 264, [100, 50, 7]
    nll = [n * math.log(vocab) for n in tokens]
    got = perplexity(nll, tokens)
    assert got["mean"] == pytest.approx(vocab) and got["ci95"] == pytest.approx([vocab, vocab])
    varied = perplexity([10.0, 40.0, 25.0, 5.0], [10, 10, 10, 10], seed=0)
    assert varied["mean"] == pytest.approx(math.exp(80 / 40))
    assert varied["ci95"][0] < varied["mean"] < varied["ci95"][1]
