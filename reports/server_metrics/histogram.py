"""Quantiles of a Prometheus histogram from its cumulative bucket counts, as histogram_quantile does.

    upper bounds (le):  0.01   0.02   0.04   +Inf
    cumulative counts:  2      7      9      10        q = 0.5 -> rank 5 falls in (0.01, 0.02]:
                                                       0.01 + 0.01 * (5 - 2) / (7 - 2) = 0.016

Inside a bucket the observations are assumed spread evenly (linear interpolation), so a
quantile is only as sharp as the bucket that holds it: the answer carries that bucket's bounds.
A rank in the +Inf bucket answers the highest finite bound (Prometheus' rule); the first bucket
starts at 0 (latencies are never negative). Pure: numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BucketQuantile:
    value: float                  # the interpolated quantile
    bucket: tuple[float, float]   # (lower, upper] bounds of the bucket holding it: the resolution


def histogram_quantile(q: float, upper_bounds: np.ndarray, cumulative: np.ndarray) -> BucketQuantile | None:
    """The q-quantile (0 <= q <= 1) of observations counted in cumulative buckets `cumulative[i]`
    (observations <= upper_bounds[i], sorted ascending, the last +Inf); None when nothing was counted
    or the +Inf bucket is absent."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    bounds, counts = np.asarray(upper_bounds, dtype=float), np.asarray(cumulative, dtype=float)
    if len(bounds) < 2 or not math.isinf(bounds[-1]):
        return None
    counts = np.maximum.accumulate(np.maximum(counts, 0.0))   # a counter reset mid-window must not go negative
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    index = int(np.searchsorted(counts, rank, side="left"))
    if index >= len(bounds) - 1:                              # the +Inf bucket: the highest finite bound
        return BucketQuantile(float(bounds[-2]), (float(bounds[-2]), math.inf))
    lower = 0.0 if index == 0 else float(bounds[index - 1])
    upper = float(bounds[index])
    below = 0.0 if index == 0 else counts[index - 1]
    in_bucket = counts[index] - below
    value = upper if in_bucket <= 0 else lower + (upper - lower) * (rank - below) / in_bucket
    return BucketQuantile(float(value), (lower, upper))
