"""Paired statistics of an interleaved A/B comparison. Pure: arrays in, dataclasses out.

Each pair of slices gives one log ratio per metric, r_i = log(B_i / A_i), where A_i and
B_i are the arm's statistic (p50 TTFT, output tokens/s, ...) over the requests it was
sent in that slice. Slow drift moves A_i and B_i together and cancels in r_i; what is
left is the fast noise between adjacent slices plus the real effect.

- Test: Wilcoxon signed-rank on r (scipy.stats.wilcoxon, two-sided): no normality
  assumed, robust to the odd disturbed pair.
- Estimate: the Hodges-Lehmann estimator, the median of the Walsh averages (r_i + r_j)/2
  over i <= j: the estimate that goes with the signed-rank test. On a shared machine a
  burst of contention can hit one slice of a pair and not the other; a mean follows
  such a pair, this median does not (its breakdown point is 29%).
- Interval: the distribution-free interval that goes with them (Tukey; Hollander & Wolfe,
  Nonparametric Statistical Methods, 3.6): the k-th smallest and k-th largest Walsh
  averages, k from the exact null distribution of the signed-rank statistic.
- Verdict for a metric with threshold t (a fraction) at level alpha:
    SAME     the (1 - 2 alpha) interval lies within +-log(1 + t): two one-sided tests (TOST),
             the textbook equivalence test;
    WORSE    p < alpha and the point estimate is beyond t on the worse side;
    BETTER   the same on the better side;
    UNKNOWN  anything else (more pairs would decide it).
- Repeated looks (more pairs added while UNKNOWN): each look is judged at the nominal alpha
  of a group-sequential boundary (reports.paired.sequential), so that the looks together
  keep the false-alarm rate at alpha.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

SAME, WORSE, BETTER, UNKNOWN = "SAME", "WORSE", "BETTER", "UNKNOWN"
ALPHA = 0.05
MIN_PAIRS = 6          # fewer usable pairs than this: always UNKNOWN (no test has power there)


@dataclass(frozen=True)
class PairedResult:
    """One metric over the pairs of a comparison.

    Attributes:
        metric: e.g. "tpot_s.p50" or "output_tokens_per_s".
        pairs: usable pairs (both arms had a finite, positive value).
        ratio: exp(Hodges-Lehmann estimate of the log ratio): B relative to A (1.10 = B is 10% higher).
        ci: exp of the (1 - 2 alpha) Hodges-Lehmann interval of that estimate, or None.
        p_value: two-sided Wilcoxon signed-rank p-value, or None below MIN_PAIRS.
        log_sd: standard deviation of the per-pair log ratios (the noise the pairing left).
        log_sd_robust: the same from the median absolute deviation (1.4826 x MAD): the noise
            without the odd disturbed pair.
        threshold, alpha, higher_is_worse: what it was judged against.
        verdict: SAME | WORSE | BETTER | UNKNOWN.
    """

    metric: str
    pairs: int
    ratio: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    log_sd: float | None
    log_sd_robust: float | None
    threshold: float
    alpha: float
    higher_is_worse: bool
    verdict: str

    @property
    def change(self) -> float | None:
        """B relative to A as a signed fraction (+0.10 = 10% higher)."""
        return None if self.ratio is None else self.ratio - 1.0

    @property
    def worse_by(self) -> float | None:
        """How much worse B is, as a fraction (negative = better)."""
        if self.ratio is None:
            return None
        return self.ratio - 1.0 if self.higher_is_worse else 1.0 - self.ratio


def log_ratios(a, b) -> np.ndarray:
    """log(b / a) per pair, keeping the pairs where both values are finite and positive."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"arms have different pair counts: {a.shape} vs {b.shape}")
    usable = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    return np.log(b[usable] / a[usable])


def hodges_lehmann(r: np.ndarray, axis: int = -1) -> np.ndarray | float:
    """Median of the Walsh averages (r_i + r_j) / 2, i <= j, along `axis`."""
    r = np.moveaxis(np.asarray(r, dtype=np.float64), axis, -1)
    i, j = np.triu_indices(r.shape[-1])
    return np.median((r[..., i] + r[..., j]) / 2.0, axis=-1)


def robust_sd(r: np.ndarray) -> float:
    """1.4826 x the median absolute deviation: the SD of normal noise, ignoring outliers."""
    return float(sps.median_abs_deviation(r, scale="normal"))


def signed_rank_cdf(n: int) -> np.ndarray:
    """P(T+ <= t) for t = 0 .. n(n+1)/2 under the null (exact: the number of subsets of 1..n with each sum)."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for i in range(1, n + 1):   # subsets using 1..i: those without i plus those with i (shifted by i)
        counts[i:] = counts[i:] + counts[:-i].copy()
        counts /= counts.sum()   # keep it a distribution (2^n overflows floats past n ~ 1000)
    return np.cumsum(counts)


def estimate_ci(r: np.ndarray, confidence: float) -> tuple[float, float]:
    """The Hodges-Lehmann interval: [W_(k), W_(M+1-k)] over the M sorted Walsh averages, with k the
    largest rank such that P(T+ <= k - 1) <= (1 - confidence) / 2 (log scale). Its coverage is at
    least `confidence`, exactly so up to the discreteness of T+."""
    n = len(r)
    i, j = np.triu_indices(n)
    walsh = np.sort((r[i] + r[j]) / 2.0)
    cdf = signed_rank_cdf(n)
    tail = (1 - confidence) / 2
    k = max(1, int(np.searchsorted(cdf, tail, side="right")))   # P(T+ <= k - 1) <= tail
    return float(walsh[k - 1]), float(walsh[len(walsh) - k])


def signed_rank_p(r: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value of r against 0 (1.0 when every r is 0)."""
    if not np.any(r != 0):
        return 1.0
    return float(sps.wilcoxon(r, zero_method="wilcox", alternative="two-sided").pvalue)


def judge(metric: str, a, b, *, threshold: float, higher_is_worse: bool, alpha: float = ALPHA) -> PairedResult:
    """The verdict for one metric from its per-pair values in arm A and arm B (see module docstring)."""
    if not 0 < threshold < 1:
        raise ValueError(f"threshold for {metric} must be a fraction in (0, 1), got {threshold!r}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha!r}")
    r = log_ratios(a, b)
    if len(r) < MIN_PAIRS:
        ratio = float(np.exp(hodges_lehmann(r))) if len(r) else None
        spread = (float(r.std(ddof=1)), robust_sd(r)) if len(r) > 1 else (None, None)
        return PairedResult(metric, len(r), ratio, None, None, *spread, threshold, alpha, higher_is_worse, UNKNOWN)
    mean = float(hodges_lehmann(r))
    lo, hi = estimate_ci(r, 1 - 2 * alpha)
    p = signed_rank_p(r)
    bound = math.log1p(threshold)
    worse_sign = 1.0 if higher_is_worse else -1.0
    if -bound < lo and hi < bound:
        verdict = SAME
    elif p < alpha and worse_sign * mean > bound:
        verdict = WORSE
    elif p < alpha and -worse_sign * mean > bound:
        verdict = BETTER
    else:
        verdict = UNKNOWN
    return PairedResult(metric, len(r), math.exp(mean), (math.exp(lo), math.exp(hi)), p,
                        float(r.std(ddof=1)), robust_sd(r), threshold, alpha, higher_is_worse, verdict)


def paired_bootstrap_ratio(a_values: list[np.ndarray], b_values: list[np.ndarray], statistic, *,
                           confidence: float = 0.95, n_resamples: int = 999,
                           seed: int = 0) -> tuple[float, tuple[float, float]] | None:
    """A whole-arm statistic (e.g. p99 over all of an arm's requests) as B/A, with an interval.

    `a_values[i]`, `b_values[i]`: the raw values (e.g. E2E of every request) of pair i in
    each arm. Each resample draws pairs with replacement and pools each arm's values over
    the drawn pairs, so the interval keeps the pairing (both arms resampled together).
    Returns (ratio, (lo, hi)) or None when an arm has no values.
    """
    keep = [i for i in range(len(a_values)) if len(a_values[i]) and len(b_values[i])]
    if len(keep) < 2:
        return None
    a_values = [np.asarray(a_values[i], dtype=np.float64) for i in keep]
    b_values = [np.asarray(b_values[i], dtype=np.float64) for i in keep]
    point = statistic(np.concatenate(b_values)) / statistic(np.concatenate(a_values))
    rng = np.random.default_rng(seed)
    ratios = np.empty(n_resamples)
    n = len(keep)
    for k in range(n_resamples):
        draw = rng.integers(0, n, n)
        ratios[k] = (statistic(np.concatenate([b_values[i] for i in draw]))
                     / statistic(np.concatenate([a_values[i] for i in draw])))
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(ratios, [tail, 1 - tail])
    return float(point), (float(lo), float(hi))
