"""Group-sequential looks: the nominal alpha each look of a compare run may test at.

A compare run looks at its pairs, and adds pairs while a gated metric is UNKNOWN. Testing
every look at the full alpha would raise the false-alarm rate with each look, so the looks
share alpha through a spending function (Lan & DeMets 1983, Pocock type): by information
fraction t = pairs / max_pairs, alpha(t) = alpha x ln(1 + (e - 1) t) has been spent.

What a look may spend is not the look's nominal alpha. The looks test nested sets of pairs,
so their statistics are strongly correlated: under no change, the standardised statistic at
the looks behaves as Z_k = W(t_k) / sqrt(t_k) of one Brownian motion W (corr(Z_j, Z_k) =
sqrt(t_j / t_k)). A look crosses only if none before it did; Lan & DeMets choose boundary
c_k so that P(|Z_j| < c_j for j < k, |Z_k| >= c_k) = alpha(t_k) - alpha(t_{k-1}). Spending
the increment as the nominal alpha (Bonferroni) ignores the correlation and throws power
away: at 40 pairs with looks every 6, the last look's interval was a 99.8% one where the
correlated boundary gives about 97%.

The boundaries come from simulated Brownian paths (seeded: the same looks always get the
same alphas, and a run's recorded alphas can be replayed). The signed-rank statistic and
the Hodges-Lehmann interval are asymptotically normal with this same covariance, so the
boundary carries over; the SAME verdict's two one-sided tests each hold at the nominal
alpha, which bounds their crossing probability too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

PATHS = 400_000       # simulated paths: the k-th boundary's crossing mass is estimated to ~1e-4 at alpha 0.05
SEED = 20170422       # fixed: boundaries are a function of the looks alone
FLOOR = 1e-6          # a look past the horizon (nothing left to spend) still gets a usable alpha


def pocock_spent(alpha: float, information: float) -> float:
    """Alpha spent by information fraction t in [0, 1]: alpha x ln(1 + (e - 1) t) (Lan & DeMets, Pocock type)."""
    t = min(max(information, 0.0), 1.0)
    return alpha * math.log1p((math.e - 1) * t)


def look_alphas(alpha: float, looks: Sequence[int], pairs_max: int) -> list[float]:
    """Nominal two-sided alpha of each look, for looks at `looks` pairs (increasing) of a `pairs_max` horizon.

    The first look's nominal alpha is what the function has spent by then; each later look's
    is the two-sided level of the boundary whose crossing, by a path that crossed no earlier
    look, has the probability the function releases between the two looks."""
    if pairs_max <= 0:
        raise ValueError("pairs_max must be positive")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha!r}")
    if any(n <= 0 for n in looks) or any(b <= a for a, b in zip(looks, looks[1:])):
        raise ValueError(f"looks must be increasing positive pair counts, got {list(looks)}")
    fractions = [min(n / pairs_max, 1.0) for n in looks]
    rng = np.random.default_rng(SEED)
    walk = np.zeros(PATHS)           # W(t) of each path
    alive = np.ones(PATHS, dtype=bool)
    t_before, spent_before, alphas = 0.0, 0.0, []
    for t in fractions:
        if t > t_before:
            walk += rng.standard_normal(PATHS) * math.sqrt(t - t_before)
        z = np.abs(walk) / math.sqrt(max(t, 1e-12))
        release = pocock_spent(alpha, t) - spent_before
        crossings = int(round(release * PATHS))
        survivors = np.sort(z[alive])[::-1]
        if not alphas and 0 < release:     # the first look: exactly what has been spent
            bound = float(sps.norm.isf(release / 2))
            alphas.append(release)
        elif crossings <= 0 or t <= t_before:
            alphas.append(FLOOR)
            bound = np.inf
        elif crossings >= len(survivors):
            alphas.append(release)
            bound = 0.0
        else:
            bound = float((survivors[crossings - 1] + survivors[crossings]) / 2)
            alphas.append(max(float(2 * sps.norm.sf(bound)), FLOOR))
        alive &= z < bound
        t_before, spent_before = max(t, t_before), pocock_spent(alpha, max(t, t_before))
    return alphas


def look_alpha(alpha: float, looks: Sequence[int], pairs_max: int) -> float:
    """The nominal alpha of the last of `looks` (see look_alphas)."""
    return look_alphas(alpha, looks, pairs_max)[-1]
