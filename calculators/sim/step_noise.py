"""A step-time model's residuals split by time scale: the machine's slow speed and the fast rest.

    ratio_i = measured_i / modelled_i                        each step's residual factor
    slow[w][k] = sum(measured) / sum(modelled)               over window w's steps starting in its
                                                             k-th bin of `bin_s` wall seconds
    fast_i = ratio_i / slow[w][bin of step i]

The slow factor of a bin is time-weighted (its steps' time over what the model gives them), so
model x slow x fast puts back every step's measured time, and a simulator that takes the bin's
factor for each step of its wall time spends as long in a slow stretch as the engine did. A bin
with fewer than `min_steps` steps (an idle engine, a window's edge) carries the bin before it
(the window's first: the window's own factor). On this 2-core VM the slow part is most of the
spread: a level's residuals (log sd 0.17-0.28) keep a sd of 0.09-0.23 after averaging over 1 s,
with stretches 1.5-1.9x slower for several seconds.
Pure: arrays in, arrays out.
"""

from __future__ import annotations

import numpy as np


def split_slow(measured: np.ndarray, modelled: np.ndarray, starts: np.ndarray, window: np.ndarray | None,
               bin_s: float, min_steps: int = 8) -> tuple[tuple[tuple[float, ...], ...], np.ndarray]:
    """(one slow path per window, in window order; [S] fast factors). Arrays [S] in time order;
    `window`: each step's window (rounds of a level) or None (one window). Steps whose model gives
    no time, or that took none, are left out of the slow factors and get a NaN fast factor."""
    if not bin_s > 0:
        raise ValueError(f"bin_s must be positive seconds, got {bin_s!r}")
    measured, modelled, starts = (np.asarray(a, dtype=float) for a in (measured, modelled, starts))
    window = np.zeros(len(starts), dtype=np.int64) if window is None else np.asarray(window, dtype=np.int64)
    usable = np.isfinite(measured) & np.isfinite(modelled) & (measured > 0) & (modelled > 0)
    fast = np.full(len(starts), np.nan)
    paths = []
    for w in np.unique(window):
        own = np.flatnonzero((window == w) & usable)
        if not len(own):
            continue
        own = own[np.argsort(starts[own], kind="stable")]   # the path in time order, whatever the rows'
        bins = np.floor((starts[own] - starts[own[0]]) / bin_s).astype(np.int64)
        count = np.bincount(bins)
        spent = np.bincount(bins, weights=measured[own])
        given = np.bincount(bins, weights=modelled[own])
        factor = spent.sum() / given.sum()
        path = np.empty(len(count))
        for k in range(len(count)):
            if count[k] >= min_steps:
                factor = spent[k] / given[k]
            path[k] = factor
        fast[own] = measured[own] / modelled[own] / path[bins]
        paths.append(tuple(float(f) for f in path))
    return tuple(paths), fast
