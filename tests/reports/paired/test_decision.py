"""The sequential verdict: a metric decided at a look keeps that look's verdict."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reports.paired.decision import decide
from reports.paired.slices import METRIC_KEYS
from reports.paired.stats import SAME, UNKNOWN, WORSE


def table(log_ratios: dict[str, np.ndarray]) -> pd.DataFrame:
    """A per-slice table whose pair i has B/A = exp(log_ratios[metric][i]) for each metric."""
    pairs = len(next(iter(log_ratios.values())))
    rows = []
    for pair in range(pairs):
        for arm in ("a", "b"):
            row = {"slice": 2 * pair + (arm == "b"), "pair": pair, "arm": arm, "requests": 30,
                   **{key: np.nan for key in METRIC_KEYS}}   # metrics not given: not measured
            for metric, r in log_ratios.items():
                row[metric] = 0.002 * (np.exp(r[pair]) if arm == "b" else 1.0)
            rows.append(row)
    return pd.DataFrame(rows)


@pytest.fixture
def steady_then_noisy() -> pd.DataFrame:
    """tpot: 20 quiet pairs (no change), then 10 wild ones; e2e: +20% throughout, noisily."""
    rng = np.random.default_rng(3)
    tpot = np.concatenate([rng.normal(0, 0.005, 20), rng.normal(0, 0.4, 10)])
    e2e = np.log(1.2) + rng.normal(0, 0.05, 30)
    return table({"tpot_s.p50": tpot, "e2e_s.p50": e2e})


GATED = {"tpot_s.p50": 0.05, "e2e_s.p50": 0.05}


def test_a_metric_decided_at_an_early_look_keeps_that_looks_verdict(steady_then_noisy):
    # judged once over all 30 pairs at a small alpha, the wild tail leaves TPOT undecided ...
    once = {r.metric: r for r in decide(steady_then_noisy, GATED, alpha=0.001).results}
    assert once["tpot_s.p50"].verdict == UNKNOWN
    # ... but the first look (20 pairs) had already found it SAME: it stays SAME, with that look's pairs and alpha
    looked = {r.metric: r for r in decide(steady_then_noisy, GATED, looks=[(20, 0.04), (None, 0.001)]).results}
    assert looked["tpot_s.p50"].verdict == SAME
    assert (looked["tpot_s.p50"].pairs, looked["tpot_s.p50"].alpha) == (20, 0.04)
    # a metric decided at the first look too is judged there; the verdict's alpha is the last look's
    assert looked["e2e_s.p50"].verdict == WORSE and looked["e2e_s.p50"].pairs == 20
    assert decide(steady_then_noisy, GATED, looks=[(20, 0.04), (None, 0.001)]).alpha == 0.001


def test_a_metric_no_look_decides_is_judged_at_the_last_look_on_every_pair():
    rng = np.random.default_rng(5)
    noisy = table({"tpot_s.p50": rng.normal(0, 0.3, 24)})
    result = decide(noisy, GATED, looks=[(8, 0.02), (16, 0.015), (None, 0.01)]).results[0]
    assert (result.verdict, result.pairs, result.alpha) == (UNKNOWN, 24, 0.01)


def test_a_metric_undecided_early_can_be_decided_later():
    rng = np.random.default_rng(8)
    drifting = table({"tpot_s.p50": rng.normal(0, 0.02, 40)})
    result = decide(drifting, GATED, looks=[(4, 0.03), (None, 0.02)]).results[0]
    assert result.verdict == SAME and result.pairs == 40 and result.alpha == 0.02


def test_decide_needs_an_alpha_or_looks(steady_then_noisy):
    with pytest.raises(ValueError, match="alpha or looks"):
        decide(steady_then_noisy, GATED)
