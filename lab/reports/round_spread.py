"""How far a level's measured percentile moves with its rounds alone: a bootstrap over whole rounds.

A sweep with --rounds R measures each level in R windows, interleaved with the other levels' (a
serpentine over the strategy's whole span), so the machine's drift during the span is inside every
level. Resampling whole rounds with replacement and pooling them as the report pools a level gives
the spread of that level's percentile from run to run of the same sweep:

    round_spread([values of round 1, ..., round R], q)  ->  sd of the pooled q-th percentile / its value

Its use: a model that predicted every level's expectation exactly would still show a median
|predicted / measured - 1| of about `MEDIAN_ABS_PER_SD` x that spread (a normal's median absolute
deviation), so a leave-one-level-out error well above it is the model's (or drift between the
levels' rounds), not the held-out level's own measurement noise. The i.i.d. bootstrap over requests
(reports.stats) would miss the rounds' drift: requests of one round share it.

    level_round_spreads(frame, keys) -> {"ttft_s.p50": spread, ...} | None     one level's ok records
    rounds_floor([spreads of each level, ...], keys) -> {key: floor} | None      a strategy's levels

Pure: arrays and frames in, numbers out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

MEDIAN_ABS_PER_SD = 0.674   # median |N(0, 1)|
EXACT_ROUNDS = 5            # up to this many rounds the bootstrap is enumerated (126 vectors at 5)
RESAMPLES = 400


def round_spread(rounds: Sequence[np.ndarray], q: float, *, resamples: int = RESAMPLES,
                 seed: int = 0) -> float | None:
    """Relative sd of the q-th percentile (0-100) of the pooled rounds under a bootstrap of whole
    rounds; None with fewer than two non-empty rounds (one window has no spread between rounds).
    A resample is how many times each round is drawn; up to EXACT_ROUNDS rounds every such count
    vector is taken with its multinomial weight (the exact bootstrap: 35 vectors for 4 rounds), more
    are sampled `resamples` times. Each vector's percentile is read off the values sorted once, each
    weighted by its round's count, as numpy's linear percentile of the pooled copies would be."""
    parts = [np.asarray(r, dtype=float) for r in rounds]
    parts = [r[np.isfinite(r)] for r in parts]
    parts = [r for r in parts if len(r)]
    if len(parts) < 2:
        return None
    values = np.concatenate(parts)
    labels = np.repeat(np.arange(len(parts)), [len(r) for r in parts])
    order = np.argsort(values, kind="stable")
    values, labels = values[order], labels[order]
    pooled = _pooled_percentile(values, labels, np.ones(len(parts), dtype=int), q)
    if not pooled:
        return None
    vectors, weights = _count_vectors(len(parts), resamples, seed)
    drawn = np.array([_pooled_percentile(values, labels, counts, q) for counts in vectors])
    mean = float(np.average(drawn, weights=weights))
    return float(np.sqrt(np.average((drawn - mean) ** 2, weights=weights)) / abs(pooled))


def _pooled_percentile(values: np.ndarray, labels: np.ndarray, counts: np.ndarray, q: float) -> float:
    """numpy's linear percentile of the multiset holding round r's values counts[r] times; `values`
    sorted, `labels` their rounds."""
    cumulative = np.cumsum(counts[labels])
    size = int(cumulative[-1])
    h = (size - 1) * q / 100.0
    low = int(np.floor(h))
    at = np.searchsorted(cumulative, [low, min(low + 1, size - 1)], side="right")
    x_low, x_high = values[at[0]], values[at[1]]
    return float(x_low + (h - low) * (x_high - x_low))


def _count_vectors(rounds: int, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """([V, rounds] draws of each round, [V] weights): every vector with its multinomial probability
    up to EXACT_ROUNDS rounds, else `resamples` sampled ones, equally weighted."""
    if rounds <= EXACT_ROUNDS:
        vectors = np.array([np.bincount(pick, minlength=rounds)
                            for pick in itertools.combinations_with_replacement(range(rounds), rounds)])
        weights = np.array([math.factorial(rounds) / math.prod(math.factorial(int(c)) for c in v) for v in vectors])
        return vectors, weights / weights.sum()
    rng = np.random.default_rng(seed)
    return rng.multinomial(rounds, [1.0 / rounds] * rounds, size=resamples), np.full(resamples, 1.0 / resamples)


def level_round_spreads(frame: pd.DataFrame, keys: Sequence[str]) -> dict[str, float | None] | None:
    """{"metric.pQ": round_spread} over one level's ok measure-phase records (columns `round` and each
    metric); None when the level was not measured in rounds."""
    if "round" not in frame.columns or frame["round"].nunique(dropna=True) < 2:
        return None
    by_round = [part for _, part in frame.groupby("round", sort=True)]
    out = {}
    for key in keys:
        metric, q = key.split(".")
        out[key] = round_spread([part[metric].to_numpy(dtype=float) for part in by_round], float(q[1:]))
    return out


def rounds_floor(spreads: Sequence[dict | None], keys: Sequence[str]) -> dict[str, float | None] | None:
    """{key: median over the levels of MEDIAN_ABS_PER_SD x the level's spread}: the median |error| a
    model that knew each level's expectation would still show; None when no level had rounds."""
    known = [s for s in spreads if s]
    if not known:
        return None
    out = {}
    for key in keys:
        values = [MEDIAN_ABS_PER_SD * s[key] for s in known if s.get(key) is not None]
        out[key] = float(np.median(values)) if values else None
    return out
