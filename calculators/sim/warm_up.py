"""The engine's warm-up after it idles: the first steps after a wait run slower than the rest.

    since_idle_i = steps since the engine last could run nothing (0: the first step after a wait)
    warm[k] = mean(fast_i : since_idle_i in k's group) / mean(fast_i : since_idle_i >= WARM_STEPS)
              groups: 0, 1, 2, 3, 4-7, 8-15 (one factor each, for every k of the group)

On this 2-core VM the first step after the engine waited (its thread asleep on a queue or a batch
timer; the front end busy with the request that woke it) ran 1.33-1.42x its batch's usual time, the
next 1.17-1.24x, steps 4-7 1.06x and 8-15 1.03x (r-continuous-dynamic, r-static-none: every level
with 100 or more waits). A closed loop at one user waits before every request, so each of its
prefills is a first step: block-bootstrapped residuals give that slow step to a random step
instead, and the prediction's TTFT came out 14-17% low (continuous c=1, three sweeps).
`fast` is the residual after the machine's slow speed (`calculators.sim.step_noise`), so a slow stretch
of seconds is not read as warm-up. Pure: arrays in, arrays out.
"""

from __future__ import annotations

import numpy as np

WARM_STEPS = 16                                       # steps after a wait that get a factor
GROUPS = ((0, 1), (1, 2), (2, 3), (3, 4), (4, 8), (8, 16))   # [from, to) steps since the wait, one factor each
MIN_WAITS = 20                                        # fewer waits than this: no warm-up (too few to fit)


def steps_since_idle(idle_after: np.ndarray) -> np.ndarray:
    """[S] steps since the engine last went idle, from [S] `idle_after` flags in the engine's step order
    (the step after a flagged one is 0; steps before the first flag count from the record's start,
    which follows the engine's idle start-up: the first step is 0)."""
    idle = np.asarray(idle_after, dtype=bool)
    if not len(idle):
        return np.zeros(0, dtype=np.int64)
    index = np.arange(len(idle))
    last_wait = np.maximum.accumulate(np.where(np.concatenate(([True], idle[:-1])), index, 0))
    return index - last_wait


def fit_warm_up(fast: np.ndarray, since_idle: np.ndarray, min_waits: int = MIN_WAITS) -> tuple[float, ...]:
    """[WARM_STEPS] factors for the k-th step after a wait, or () when fewer than `min_waits` waits
    (steps with since_idle 0) have a usable `fast` factor or no step ran long after one.
    `fast`, `since_idle`: [S] each (NaN fast factors are left out)."""
    fast, since = np.asarray(fast, dtype=float), np.asarray(since_idle, dtype=np.int64)
    usable = np.isfinite(fast) & (fast > 0)
    settled = usable & (since >= WARM_STEPS)
    if np.count_nonzero(usable & (since == 0)) < min_waits or not settled.any():
        return ()
    reference = fast[settled].mean()
    curve = np.ones(WARM_STEPS)
    for lo, hi in GROUPS:
        group = usable & (since >= lo) & (since < hi)
        if group.any():
            curve[lo:hi] = fast[group].mean() / reference
    return tuple(float(f) for f in curve)


def without_warm_up(fast: np.ndarray, since_idle: np.ndarray, curve: tuple[float, ...]) -> np.ndarray:
    """[S] fast factors with the warm-up divided out (what is left for the block bootstrap to draw)."""
    fast = np.asarray(fast, dtype=float)
    if not curve:
        return fast
    since = np.asarray(since_idle, dtype=np.int64)
    factor = np.ones(len(fast))
    warm = since < len(curve)
    factor[warm] = np.asarray(curve)[since[warm]]
    return fast / factor
