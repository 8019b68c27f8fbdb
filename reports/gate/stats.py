"""Noise-aware comparison of a metric between a baseline and a current run. Pure: no I/O.

For each metric the gate needs three things:
- the observed ratio current / baseline of the statistic (p50, p99, mean, or a rate);
- a 95% bootstrap confidence interval of that ratio (scipy.stats.bootstrap,
  percentile method), each run resampled independently;
- for whole distributions, a one-sided Mann-Whitney U test in the regression
  direction (scipy.stats.mannwhitneyu), robust to the heavy tails of latency.

Requests of one run are not independent: those in flight together share batches
and whatever else was running on the machine at that moment, so a burst of
contention moves many of them at once. Treating them as independent makes a test
far too sure of itself (an A/A pair on a shared CI host then "differs
significantly"). So when the caller gives each value its time block (consecutive
slices of the run, in send order), the bootstrap resamples whole blocks (a cluster
bootstrap) and the rank test compares the blocks' own statistics: the noise the
gate sees is then the noise the run really had.

Two runs ran at different times, and a machine whose speed wanders may have held either run
at a slower speed. block_drift_log_sd reads what the machine's speed did inside the runs (the
wander of their blocks' medians and the shift between their halves, net of a median's sampling
noise, so a steady machine gives ~0 and a burst in one block is not drift); the caller allows each
run an offset of that SD, widening the interval by the SD of a difference of two such offsets
(widen_for_run_noise), as it does for the run-to-run noise of replicate baselines.

A change counts as significant when the CI lies wholly on the regression side of 1
and, where a rank test applies, its p-value is below alpha. Tail statistics
(p90 and above) are judged by the CI alone: a rank test compares whole
distributions and can miss a regression that lives only in the tail.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats as sps

CONFIDENCE = 0.95
ALPHA = 0.05
N_RESAMPLES = 999
MAX_BOOTSTRAP_SAMPLE = 20_000  # larger samples are subsampled for the CI only (wider, so conservative)
TIME_BLOCKS = 10  # a run's values are cut into this many consecutive blocks for the cluster bootstrap
MIN_BLOCK_VALUES = 3
MIN_BLOCKS = 4  # fewer usable blocks than this: fall back to independent values


@dataclass(frozen=True)
class Comparison:
    """One metric in two runs.

    Attributes:
        baseline, current: the statistic in each run (full data).
        ratio: current / baseline.
        ci95: 95% bootstrap interval of the ratio, or None when either side has < 2 values.
        p_value: one-sided rank-test p-value in the regression direction, None when not applied.
        n_baseline, n_current: how many raw values (requests, gaps or windows) each side had.
    """

    baseline: float
    current: float
    ratio: float
    ci95: tuple[float, float] | None
    p_value: float | None
    n_baseline: int
    n_current: int

    def significant(self, higher_is_worse: bool, alpha: float = ALPHA) -> bool:
        """The regression direction is established: CI excludes 1 on that side (and p < alpha if tested)."""
        if self.ci95 is None:
            return False
        lo, hi = self.ci95
        ci_says = lo > 1.0 if higher_is_worse else hi < 1.0
        return ci_says and (self.p_value is None or self.p_value < alpha)


def statistic_function(stat: str):
    """'mean' or 'pNN' -> f(values, axis) usable by scipy.stats.bootstrap (vectorized)."""
    if stat == "mean":
        return lambda values, axis=-1: np.mean(values, axis=axis)
    if stat.startswith("p") and stat[1:].replace(".", "", 1).isdigit():
        q = float(stat[1:])
        if not 0 <= q <= 100:
            raise ValueError(f"percentile {stat!r} must be between p0 and p100")
        return lambda values, axis=-1: np.percentile(values, q, axis=axis)
    raise ValueError(f"unknown statistic {stat!r}; use mean or pNN (p50, p99, ...)")


def is_tail(stat: str) -> bool:
    """p90 and above: judged by the interval alone (see the module docstring)."""
    return stat.startswith("p") and float(stat[1:]) >= 90


def _clean(values) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    return values[np.isfinite(values)]


def _for_bootstrap(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if len(values) <= MAX_BOOTSTRAP_SAMPLE:
        return values
    return rng.choice(values, MAX_BOOTSTRAP_SAMPLE, replace=False)


def ratio_ci(samples: list[np.ndarray], ratio_of, seed: int = 0) -> tuple[float, float] | None:
    """95% percentile-bootstrap CI of `ratio_of(*samples, axis)` over independent samples."""
    if any(len(s) < 2 for s in samples):
        return None
    if all(np.ptp(s) == 0 for s in samples):
        value = float(ratio_of(*samples, axis=-1))
        return (value, value)
    rng = np.random.default_rng(seed)
    samples = [_for_bootstrap(s, rng) for s in samples]
    largest = max(len(s) for s in samples)
    with np.errstate(divide="ignore", invalid="ignore"):
        result = sps.bootstrap(tuple(samples), ratio_of, n_resamples=N_RESAMPLES, vectorized=True,
                               paired=False, method="percentile", confidence_level=CONFIDENCE,
                               batch=max(1, 4_000_000 // largest), rng=rng)
    lo, hi = result.confidence_interval
    return (float(lo), float(hi))


def compare_distributions(baseline, current, stat: str, higher_is_worse: bool = True,
                          seed: int = 0) -> Comparison:
    """Compare `stat` (p50, p99, mean, ...) of two samples of raw values (latencies or window rates)."""
    baseline, current = _clean(baseline), _clean(current)
    if len(baseline) == 0 or len(current) == 0:
        raise ValueError(f"cannot compare {stat}: baseline has {len(baseline)} values, current {len(current)}")
    f = statistic_function(stat)
    base_value, cur_value = float(f(baseline)), float(f(current))

    def ratio_of(b, c, axis=-1):
        return f(c, axis=axis) / f(b, axis=axis)

    ci = ratio_ci([baseline, current], ratio_of, seed)
    p_value = None
    if not is_tail(stat) and len(baseline) >= 2 and len(current) >= 2:
        alternative = "greater" if higher_is_worse else "less"
        p_value = float(sps.mannwhitneyu(current, baseline, alternative=alternative).pvalue)
    ratio = cur_value / base_value if base_value else float("inf")
    return Comparison(base_value, cur_value, ratio, ci, p_value, len(baseline), len(current))


def compare_within_run_ratios(base_num, base_den, cur_num, cur_den, seed: int = 0) -> Comparison:
    """Compare mean(num)/mean(den) measured within each run (e.g. per-window throughputs of two levels)."""
    samples = [_clean(s) for s in (base_num, base_den, cur_num, cur_den)]
    if any(len(s) == 0 for s in samples):
        raise ValueError("cannot compare a within-run ratio: a level has no measurement windows")
    b_num, b_den, c_num, c_den = (float(np.mean(s)) for s in samples)
    base_value, cur_value = b_num / b_den, c_num / c_den

    def ratio_of(bn, bd, cn, cd, axis=-1):
        return (np.mean(cn, axis=axis) / np.mean(cd, axis=axis)) / (np.mean(bn, axis=axis) / np.mean(bd, axis=axis))

    ci = ratio_ci(samples, ratio_of, seed)
    return Comparison(base_value, cur_value, cur_value / base_value, ci, None,
                      len(samples[0]), len(samples[2]))


def time_blocks(order_key, blocks: int = TIME_BLOCKS) -> np.ndarray:
    """Block index [n] for values ordered by `order_key` (e.g. send time): equal-count consecutive slices."""
    order_key = np.asarray(order_key, dtype=np.float64)
    n = len(order_key)
    k = max(1, min(blocks, n // MIN_BLOCK_VALUES))
    ranks = np.empty(n, dtype=np.int64)
    ranks[np.argsort(order_key, kind="stable")] = np.arange(n)
    return ranks * k // max(n, 1)


def _groups(values: np.ndarray, blocks: np.ndarray) -> list[np.ndarray]:
    keep = np.isfinite(values)
    values, blocks = values[keep], blocks[keep]
    return [values[blocks == b] for b in np.unique(blocks) if np.count_nonzero(blocks == b)]


def _resampled_blocks(groups: list[np.ndarray], stat: str):
    """f(block_indices[..., k]) -> `stat` of each row's blocks pooled, for the cluster bootstrap.

    All resamples at once, without pooling them: a resample is how many times it drew each block, so
    its pooled sample is every value weighted by its block's count, and the number of pooled values
    among the i smallest values is that count times each block's share of them. The k-th smallest
    pooled value is found by bisection over the sorted values, for every resample together. A
    percentile is numpy's default (linear) one of the pooled values, so it equals np.percentile of
    the blocks concatenated, at a cost of blocks x log(values) per resample instead of a sort.
    """
    statistic_function(stat)  # the same names and the same error for a bad one
    sizes = np.array([len(g) for g in groups])
    block_ids = np.arange(len(groups))

    def counts_of(index):
        return (index.astype(np.int64)[..., None] == block_ids).sum(axis=-2)

    if stat == "mean":
        sums = np.array([g.sum() for g in groups])

        def mean(index):
            counts = counts_of(index)
            return (counts * sums).sum(axis=-1) / (counts * sizes).sum(axis=-1)

        return mean
    q = float(stat[1:]) / 100.0
    values = np.concatenate(groups)
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    block_of_sorted = np.repeat(block_ids, sizes)[order]
    # below[j, g]: how many of the j smallest values belong to block g
    below = np.zeros((len(values) + 1, len(groups)), dtype=np.int64)
    below[1:] = np.cumsum(block_of_sorted[:, None] == block_ids, axis=0)

    def kth_smallest(counts, k):
        low = np.zeros(len(k), dtype=np.int64)
        high = np.full(len(k), len(values) - 1)
        while np.any(low < high):
            middle = (low + high) // 2
            passed = (below[middle + 1] * counts).sum(axis=-1) > k
            high, low = np.where(passed, middle, high), np.where(passed, low, middle + 1)
        return sorted_values[low]

    def percentile(index):
        counts = counts_of(index).reshape(-1, len(groups))
        total = (counts * sizes).sum(axis=-1)
        position = q * (total - 1)
        floor = np.floor(position).astype(np.int64)
        low, high = kth_smallest(counts, floor), kth_smallest(counts, np.minimum(floor + 1, total - 1))
        weight = position - floor
        value = np.where(weight >= 0.5, high - (high - low) * (1 - weight), low + (high - low) * weight)
        return value.reshape(index.shape[:-1])

    return percentile


def compare_blocked(baseline, baseline_blocks, current, current_blocks, stat: str,
                    higher_is_worse: bool = True, seed: int = 0) -> Comparison:
    """Like compare_distributions, but resampling whole time blocks (cluster bootstrap) and rank-testing
    the blocks' statistics; falls back to independent values when either run has < MIN_BLOCKS blocks."""
    baseline, current = np.asarray(baseline, dtype=np.float64), np.asarray(current, dtype=np.float64)
    b_groups = _groups(baseline, np.asarray(baseline_blocks))
    c_groups = _groups(current, np.asarray(current_blocks))
    if len(b_groups) < MIN_BLOCKS or len(c_groups) < MIN_BLOCKS:
        return compare_distributions(baseline, current, stat, higher_is_worse, seed)
    f = statistic_function(stat)
    base_all, cur_all = np.concatenate(b_groups), np.concatenate(c_groups)
    base_value, cur_value = float(f(base_all)), float(f(cur_all))

    b_stat, c_stat = _resampled_blocks(b_groups, stat), _resampled_blocks(c_groups, stat)

    def ratio_of(b_index, c_index, axis=-1):
        return c_stat(c_index) / b_stat(b_index)

    rng = np.random.default_rng(seed)
    indices = (np.arange(len(b_groups)), np.arange(len(c_groups)))
    with np.errstate(divide="ignore", invalid="ignore"):
        result = sps.bootstrap(indices, ratio_of, n_resamples=N_RESAMPLES, vectorized=True, paired=False,
                               method="percentile", confidence_level=CONFIDENCE, rng=rng)
    lo, hi = result.confidence_interval
    p_value = None
    if not is_tail(stat):
        alternative = "greater" if higher_is_worse else "less"
        p_value = float(sps.mannwhitneyu([f(g) for g in c_groups], [f(g) for g in b_groups],
                                         alternative=alternative).pvalue)
    ratio = cur_value / base_value if base_value else float("inf")
    return Comparison(base_value, cur_value, ratio, (float(lo), float(hi)), p_value,
                      len(base_all), len(cur_all))


def between_run_log_sd(values) -> float | None:
    """Sample SD of log(statistic) over replicate runs of the same setup; None with < 2 usable runs."""
    logs = [math.log(v) for v in values if v is not None and v > 0 and math.isfinite(v)]
    if len(logs) < 2:
        return None
    return float(np.std(logs, ddof=1))


def widen_for_run_noise(comparison: Comparison, log_sd: float, higher_is_worse: bool) -> Comparison:
    """Add between-run noise to a within-run comparison (log scale, normal approximation).

    The within-run interval gives se_w = (ln hi - ln lo) / (2 z); each of the two runs also
    carries a run-level offset with SD `log_sd` (estimated from replicate baselines), so
    se = sqrt(se_w^2 + 2 log_sd^2), the interval is ratio x exp(+-z se), and the one-sided
    p-value is that of z = ln(ratio) / se in the regression direction.
    """
    if comparison.ci95 is None or not comparison.ratio > 0:
        return comparison
    z = float(sps.norm.ppf(0.5 + CONFIDENCE / 2))
    lo, hi = comparison.ci95
    se_within = (math.log(hi) - math.log(lo)) / (2 * z) if lo > 0 and hi > 0 else 0.0
    se = math.sqrt(se_within ** 2 + 2 * log_sd ** 2)
    center = math.log(comparison.ratio)
    if se == 0:
        return comparison
    ci = (math.exp(center - z * se), math.exp(center + z * se))
    p_value = float(sps.norm.sf(center / se) if higher_is_worse else sps.norm.cdf(center / se))
    return replace(comparison, ci95=ci, p_value=p_value)


def median_log_se(logs) -> float:
    """Distribution-free standard error of a sample's median: the order-statistic 95% interval of the
    median, x_(l) .. x_(u) with l, u = n/2 -/+ 1.96 sqrt(n) / 2 (Conover), divided by 2 x 1.96. It
    assumes independent values, so for values that share a moment (requests in flight together) it is
    too small, and what it leaves unexplained is counted as drift: the safe side."""
    logs = np.sort(np.asarray(logs, dtype=np.float64))
    n = len(logs)
    if n < 2:
        return 0.0
    z = float(sps.norm.ppf(0.5 + CONFIDENCE / 2))
    half = z * math.sqrt(n) / 2
    lo, hi = max(0, math.floor(n / 2 - half)), min(n - 1, math.ceil(n / 2 + half) - 1)
    return float(logs[hi] - logs[lo]) / (2 * z)


MAD_TO_SD = 1.4826  # the median absolute deviation of a normal sample is 0.6745 SD
MEDIAN_VARIANCE = math.pi / 2   # the variance of a median of k normal values over that of their mean
WINSOR_AT = 2.5     # block deviations beyond this many robust SDs count as this many (a burst, not a wander)


def block_drift_log_sd(*runs) -> float | None:
    """How far one run may sit from another for the machine's sake alone: the SD of a run's offset on
    the log scale, from what the machine's speed did inside `runs` (each a (values, blocks) pair, as
    compare_blocked takes; pooled over them). None when a run has < MIN_BLOCKS blocks.

    The larger of two readings, each net of the sampling noise of a median (median_log_se):
    - wander: the SD of the blocks' medians, each run about its own median (so the difference between
      the runs is never counted), winsorized: a block further out than WINSOR_AT robust SDs (from the
      median absolute deviation) counts as that far. A burst of contention that slows a block or two
      then adds little, as it moves the run's p50 little (the block bootstrap carries such a burst as
      the run's own noise), while a machine whose speed wanders through the run moves every block.
      A run may sit as far from another as its blocks sit from each other.
    - shift: the median of the block medians of a run's second half against its first half's, D. Over
      the runs E[D^2] is twice the variance of a sustained change of speed plus the sampling variance
      of two such medians; contention that starts half-way and stays moves it fully, a burst in one
      block of a half not at all.
    Medians on the log scale, because a slower machine scales every latency of its moment by one factor.
    What a median's sampling noise leaves unexplained is counted as drift: requests in flight together
    share batches, so that noise is larger than median_log_se says, and the safe side is to allow
    more. A whole run held at one slower speed shows neither reading.
    """
    deviations, sampling, d2, s2 = [], [], 0.0, 0.0
    for values, blocks in runs:
        values, blocks = np.asarray(values, dtype=np.float64), np.asarray(blocks)
        keep = np.isfinite(values) & (values > 0) & (blocks >= 0)
        logs, blocks = np.log(values[keep]), blocks[keep]
        labels = np.unique(blocks)
        if len(labels) < MIN_BLOCKS:
            return None
        groups = [logs[blocks == label] for label in labels]
        medians = np.array([np.median(group) for group in groups])
        deviations.append(medians - np.median(medians))
        sampling.extend(median_log_se(group) ** 2 for group in groups)
        half = len(labels) // 2   # an odd middle block sits out
        d2 += (float(np.median(medians[len(labels) - half:])) - float(np.median(medians[:half]))) ** 2
        s2 += 2 * MEDIAN_VARIANCE * float(np.mean(sampling[-len(labels):])) / half
    if not runs:
        return None
    every = np.concatenate(deviations)
    limit = WINSOR_AT * MAD_TO_SD * float(np.median(np.abs(every)))
    dof = len(every) - len(deviations)   # each run about its own median
    wander = float(np.sum(np.clip(every, -limit, limit) ** 2)) / dof - float(np.median(sampling))
    shift = (d2 - s2) / len(runs) / 2
    return math.sqrt(max(0.0, wander, shift))
