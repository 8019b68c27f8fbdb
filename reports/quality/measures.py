"""The quality measures, per prompt, and their mean over prompts with a bootstrap interval.

    prefix_agreement(a, b)          share of positions before the first divergence (the longer output's length)
    positional_agreement(a, b)      share of positions where the two outputs hold the same token
    kl_divergence(logp_a, logp_b)   KL(A || B) of next-token distributions, one value per position
    summarize(values, seed)         {"mean", "ci95": [lo, hi], "n"}: a percentile bootstrap over prompts

Prompts are the unit of resampling: positions within one prompt share their context, so they are not
independent draws, and an interval over positions would be too narrow. Pure: numpy and scipy only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
RESAMPLES = 2000


def prefix_agreement(a: Sequence[int], b: Sequence[int]) -> float:
    """Positions before the first one where the outputs differ (or the shorter ends), over the longer's length."""
    length = max(len(a), len(b))
    if length == 0:
        return 1.0
    same = 0
    for x, y in zip(a, b):
        if x != y:
            break
        same += 1
    return same / length


def positional_agreement(a: Sequence[int], b: Sequence[int]) -> float:
    """Positions holding the same token in both outputs, over the longer's length (after a divergence the two
    continue from different contexts: the teacher-forced top-1 agreement is the cleaner overall measure)."""
    length = max(len(a), len(b))
    if length == 0:
        return 1.0
    return sum(x == y for x, y in zip(a, b)) / length


def kl_divergence(logp_a: np.ndarray, logp_b: np.ndarray) -> np.ndarray:
    """KL(A || B) in nats at each row of two [positions, vocab] log-probability arrays."""
    logp_a, logp_b = np.asarray(logp_a, dtype=np.float64), np.asarray(logp_b, dtype=np.float64)
    if logp_a.shape != logp_b.shape:
        raise ValueError(f"log-probabilities differ in shape: {logp_a.shape} and {logp_b.shape}")
    p_a = np.exp(logp_a)
    with np.errstate(invalid="ignore"):   # 0 * -inf where both put no mass: it contributes 0
        terms = np.where(p_a > 0, p_a * (logp_a - logp_b), 0.0)
    return terms.sum(axis=-1)


def top_logprob_kl(top_a: dict[str, float], top_b: dict[str, float]) -> float:
    """KL(A || B) over the tokens A's top log-probabilities name, each side renormalized over them; a token B
    did not list gets B's smallest listed log-probability (an upper bound on its mass). For servers that
    return only the top k: an estimate, not the full-vocabulary KL."""
    top_a = {t: v for t, v in (top_a or {}).items() if v is not None and np.isfinite(v)}
    top_b = {t: v for t, v in (top_b or {}).items() if v is not None and np.isfinite(v)}
    if not top_a or not top_b:
        raise ValueError("top log-probabilities are empty (or none finite)")
    tokens = list(top_a)
    floor = min(top_b.values())
    la = np.array([top_a[t] for t in tokens])
    lb = np.array([top_b.get(t, floor) for t in tokens])
    la, lb = la - np.logaddexp.reduce(la), lb - np.logaddexp.reduce(lb)
    return float(np.sum(np.exp(la) * (la - lb)))


def summarize(values: Sequence[float], seed: int = 0) -> dict:
    """The mean of per-prompt values and its 95% percentile-bootstrap interval (prompts resampled)."""
    data = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=np.float64)
    if data.size == 0:
        return {"mean": None, "ci95": None, "n": 0}
    mean = float(data.mean())
    if data.size == 1 or np.ptp(data) == 0:
        return {"mean": mean, "ci95": [mean, mean], "n": int(data.size)}
    result = stats.bootstrap((data,), np.mean, confidence_level=CONFIDENCE, n_resamples=RESAMPLES,
                             method="percentile", rng=np.random.default_rng(seed))
    interval = result.confidence_interval
    return {"mean": mean, "ci95": [float(interval.low), float(interval.high)], "n": int(data.size)}


def perplexity(nll_per_chunk: Sequence[float], tokens_per_chunk: Sequence[int], seed: int = 0) -> dict:
    """exp(mean negative log-likelihood per token) over text chunks, with the interval from resampling chunks."""
    nll = np.asarray(nll_per_chunk, dtype=np.float64)
    counts = np.asarray(tokens_per_chunk, dtype=np.float64)
    if nll.size == 0 or counts.sum() <= 0:
        return {"mean": None, "ci95": None, "n": 0}
    value = float(np.exp(nll.sum() / counts.sum()))
    if nll.size == 1:
        return {"mean": value, "ci95": [value, value], "n": 1}
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, nll.size, size=(RESAMPLES, nll.size))
    resampled = np.exp(nll[picks].sum(axis=1) / counts[picks].sum(axis=1))
    low, high = np.quantile(resampled, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    return {"mean": value, "ci95": [float(low), float(high)], "n": int(nll.size)}
