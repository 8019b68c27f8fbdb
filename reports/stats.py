"""Percentiles and their 95% confidence intervals over raw latency values. Pure: no I/O.

Percentiles are numpy's default (linear interpolation) over the raw values.
Confidence intervals:
- small samples: scipy.stats.bootstrap, percentile method, vectorized, with
  the number of resamples capped so that resamples x n stays under
  `BOOTSTRAP_BUDGET` (a 1,000,000-record run must report in seconds);
- samples too large for >= `MIN_RESAMPLES` resamples under that budget: the
  distribution-free order-statistic interval (the one scipy.stats.quantile_test
  gives): the ranks k_lo, k_hi with Binomial(n, q) mass 95% between them. At
  that size the bootstrap interval of a quantile converges to this one, and
  it costs one np.partition instead of hundreds.
"""

from __future__ import annotations

import numpy as np
from scipy import stats as sps

from contract.level_result import Distribution

PERCENTILES = (50, 90, 95, 99)
CI_PERCENTILES = (50, 95, 99)
CONFIDENCE = 0.95
MAX_RESAMPLES = 999
MIN_RESAMPLES = 199
BOOTSTRAP_BUDGET = 2_000_000  # resamples x sample size


def _percentiles_along_last_axis(sample: np.ndarray, axis: int = -1) -> np.ndarray:
    # sample: [..., n] -> [len(CI_PERCENTILES), ...]
    return np.percentile(sample, CI_PERCENTILES, axis=axis)


def bootstrap_ci(values: np.ndarray, seed: int = 0,
                 n_resamples: int = MAX_RESAMPLES) -> dict[int, tuple[float, float]]:
    """Percentile-bootstrap 95% CIs of p50/p95/p99: {50: (lo, hi), 95: ..., 99: ...}."""
    result = sps.bootstrap(
        (values,), _percentiles_along_last_axis, n_resamples=n_resamples, vectorized=True,
        method="percentile", confidence_level=CONFIDENCE, batch=max(1, 4_000_000 // max(len(values), 1)),
        rng=np.random.default_rng(seed),
    )
    low, high = result.confidence_interval
    return {q: (float(lo), float(hi)) for q, lo, hi in zip(CI_PERCENTILES, low, high)}


def _ci_ranks(n: int) -> dict[int, tuple[int, int]]:
    """0-based ranks (k_lo, k_hi) of the order-statistic 95% interval of each CI percentile."""
    alpha = 1.0 - CONFIDENCE
    ranks = {}
    for q in CI_PERCENTILES:
        p = q / 100.0
        k_lo = int(sps.binom.ppf(alpha / 2, n, p)) - 1
        k_hi = int(sps.binom.isf(alpha / 2, n, p))
        ranks[q] = (min(max(k_lo, 0), n - 1), min(max(k_hi, 0), n - 1))
    return ranks


def _linear_ranks(n: int, q: float) -> tuple[int, int, float]:
    """numpy's default (linear) percentile: value = x[lo] + frac x (x[hi] - x[lo]), h = (n - 1) q."""
    h = (n - 1) * q / 100.0
    lo = int(np.floor(h))
    return lo, min(lo + 1, n - 1), h - lo


def order_statistic_ci(values: np.ndarray) -> dict[int, tuple[float, float]]:
    """Distribution-free 95% CIs of p50/p95/p99 from order statistics (as scipy.stats.quantile_test).

    For quantile q over n values, the interval is [x_(k_lo), x_(k_hi)] with
    k_lo = binom.ppf(a/2, n, q) - 1 and k_hi = binom.isf(a/2, n, q) (0-based ranks),
    clipped to the sample; coverage >= 95% for any continuous distribution.
    """
    return _large_sample(values)[1]


def _large_sample(values: np.ndarray) -> tuple[dict[int, float], dict[int, tuple[float, float]]]:
    """Percentiles and order-statistic CIs from one np.partition (one O(n) pass for big samples)."""
    n = len(values)
    ci_ranks = _ci_ranks(n)
    pct_ranks = {q: _linear_ranks(n, q) for q in PERCENTILES}
    wanted = sorted({r for pair in ci_ranks.values() for r in pair}
                    | {r for lo, hi, _ in pct_ranks.values() for r in (lo, hi)})
    ordered = np.partition(values, wanted)
    pcts = {}
    for q, (lo, hi, frac) in pct_ranks.items():
        a, b = float(ordered[lo]), float(ordered[hi])
        pcts[q] = a + (b - a) * frac if frac < 0.5 else b - (b - a) * (1 - frac)  # numpy's _lerp
    cis = {q: (float(ordered[lo]), float(ordered[hi])) for q, (lo, hi) in ci_ranks.items()}
    return pcts, cis


def resamples_for(n: int) -> int:
    """Bootstrap resamples affordable for n values under the budget (0: use order statistics)."""
    affordable = min(MAX_RESAMPLES, BOOTSTRAP_BUDGET // max(n, 1))
    return affordable if affordable >= MIN_RESAMPLES else 0


def summarize(values: np.ndarray, seed: int = 0) -> Distribution:
    """count, mean, p50, p90, p95, p99 and p50/p95/p99 95% CIs of raw values (NaNs dropped), as summary.json's
    `Distribution`; `ci_method` "bootstrap(R)" | "order-statistic" | "degenerate" | None (no values)."""
    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    n = len(values)
    if n == 0:
        return Distribution(count=0)
    resamples = resamples_for(n)
    if n >= 2 and not resamples:
        pcts, cis = _large_sample(values)
        method = "order-statistic"
    else:
        pcts = {q: float(v) for q, v in zip(PERCENTILES, np.percentile(values, PERCENTILES))}
    if n < 2 or np.ptp(values) == 0:
        cis, method = {q: (pcts[q], pcts[q]) for q in CI_PERCENTILES}, "degenerate"
    elif resamples:
        cis, method = bootstrap_ci(values, seed=seed, n_resamples=resamples), f"bootstrap({resamples})"
    return Distribution(count=n, mean=float(values.mean()), p50=pcts[50], p90=pcts[90], p95=pcts[95], p99=pcts[99],
                        p50_ci95=cis[50], p95_ci95=cis[95], p99_ci95=cis[99], ci_method=method)
