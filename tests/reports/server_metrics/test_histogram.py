"""Bucket quantiles as Prometheus' histogram_quantile computes them, checked against hand sums and raw data."""

import math

import numpy as np
import pytest

from reports.server_metrics.histogram import histogram_quantile

BOUNDS = np.array([0.01, 0.02, 0.04, math.inf])


def test_interpolates_inside_the_bucket_holding_the_rank():
    found = histogram_quantile(0.5, BOUNDS, np.array([2, 7, 9, 10]))
    assert found.value == pytest.approx(0.01 + 0.01 * (5 - 2) / 5) and found.bucket == (0.01, 0.02)
    first = histogram_quantile(0.1, BOUNDS, np.array([2, 7, 9, 10]))   # rank 1 in the first bucket, from 0
    assert first.value == pytest.approx(0.005) and first.bucket == (0.0, 0.01)


def test_a_rank_in_the_inf_bucket_answers_the_highest_finite_bound():
    found = histogram_quantile(0.99, BOUNDS, np.array([0, 0, 1, 10]))
    assert found.value == 0.04 and found.bucket == (0.04, math.inf)


def test_nothing_counted_or_no_inf_bucket_gives_none():
    assert histogram_quantile(0.5, BOUNDS, np.zeros(4)) is None
    assert histogram_quantile(0.5, np.array([0.1, 0.2]), np.array([1, 2])) is None
    with pytest.raises(ValueError, match="quantile"):
        histogram_quantile(1.5, BOUNDS, np.array([1, 1, 1, 1]))


def test_the_estimate_stays_in_the_bucket_of_the_true_percentile():
    """On uniform data the interpolation is exact up to one observation; on any data it stays in the true bucket."""
    rng = np.random.default_rng(0)
    bounds = np.array([*np.linspace(0.01, 0.2, 20), math.inf])
    uniform = rng.uniform(0.0, 0.2, 20_000)
    counts = np.array([(uniform <= b).sum() for b in bounds])
    assert histogram_quantile(0.9, bounds, counts).value == pytest.approx(np.percentile(uniform, 90), abs=2e-3)
    skewed = rng.lognormal(-3.5, 0.6, 5_000)
    counts = np.array([(skewed <= b).sum() for b in bounds])
    for q in (0.5, 0.9, 0.99):
        true = np.percentile(skewed, q * 100)
        lo, hi = histogram_quantile(q, bounds, counts).bucket
        assert lo <= true <= hi
