"""reports.stats: percentiles and confidence intervals checked against numpy and scipy directly."""

import numpy as np
import pytest
from scipy import stats as sps

from reports.stats import (
    CI_PERCENTILES, bootstrap_ci, order_statistic_ci, resamples_for, summarize,
)


@pytest.mark.parametrize("draw", [
    lambda rng, n: rng.exponential(0.05, n),
    lambda rng, n: rng.lognormal(-3, 0.8, n),
    lambda rng, n: rng.uniform(0.01, 0.02, n),
])
def test_percentiles_are_numpy_linear_over_raw_values(draw):
    rng = np.random.default_rng(1)
    values = draw(rng, 1237)
    out = summarize(values)
    assert out.count == 1237
    assert out.mean == pytest.approx(values.mean(), rel=1e-12)
    for q in (50, 90, 95, 99):
        assert out.at(f"p{q}") == pytest.approx(np.percentile(values, q), rel=1e-12)


def test_nans_are_dropped_and_empty_input_gives_nulls():
    out = summarize(np.array([0.1, np.nan, 0.3]))
    assert out.count == 2 and out.p50 == pytest.approx(0.2)
    empty = summarize(np.array([]))
    assert empty.count == 0 and empty.p99 is None and empty.p99_ci95 is None


def test_bootstrap_ci_is_scipys_percentile_bootstrap():
    rng = np.random.default_rng(2)
    values = rng.exponential(1.0, 400)
    mine = bootstrap_ci(values, seed=7, n_resamples=999)
    for q in CI_PERCENTILES:
        theirs = sps.bootstrap((values,), lambda x, axis=-1: np.percentile(x, q, axis=axis), n_resamples=999,
                               vectorized=True, method="percentile", rng=np.random.default_rng(7))
        # same seed, same resamples: the intervals agree to rounding
        assert mine[q][0] == pytest.approx(theirs.confidence_interval.low, rel=1e-9)
        assert mine[q][1] == pytest.approx(theirs.confidence_interval.high, rel=1e-9)


def test_bootstrap_ci_covers_the_true_p99_of_a_known_distribution():
    # Exponential(1): p99 = ln(100). A 95% interval should cover it in most of 20 trials.
    true_p99 = np.log(100)
    covered = 0
    for seed in range(20):
        values = np.random.default_rng(100 + seed).exponential(1.0, 2000)
        lo, hi = summarize(values, seed=seed).p99_ci95
        covered += lo <= true_p99 <= hi
    assert covered >= 16


def test_order_statistic_ci_matches_scipy_quantile_test():
    values = np.random.default_rng(3).lognormal(0, 1, 50_000)
    mine = order_statistic_ci(values)
    for q in CI_PERCENTILES:
        ci = sps.quantile_test(values, q=np.percentile(values, q), p=q / 100).confidence_interval(0.95)
        assert mine[q] == (pytest.approx(ci.low), pytest.approx(ci.high))


def test_large_samples_switch_to_order_statistics_and_small_ones_bootstrap():
    assert resamples_for(500) == 999
    assert resamples_for(5_000) == 400
    assert resamples_for(1_000_000) == 0
    small = summarize(np.random.default_rng(4).exponential(1.0, 500))
    big = summarize(np.random.default_rng(4).exponential(1.0, 200_000))
    assert small.ci_method == "bootstrap(999)"
    assert big.ci_method == "order-statistic"
    for out in (small, big):
        lo, hi = out.p99_ci95
        assert lo < out.p99 < hi
    # the large-sample path takes its percentiles from one np.partition: still numpy's linear ones
    values = np.random.default_rng(4).exponential(1.0, 200_000)
    for q in (50, 90, 95, 99):
        assert big.at(f"p{q}") == pytest.approx(np.percentile(values, q), rel=1e-12)


def test_constant_values_give_a_zero_width_interval():
    out = summarize(np.full(50, 0.25))
    assert out.p99 == 0.25 and out.p99_ci95 == (0.25, 0.25) and out.ci_method == "degenerate"
