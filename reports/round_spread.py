"""How far a level's measured percentile moves with its rounds alone: a bootstrap over whole rounds.

A sweep with --rounds R measures each level in R windows, interleaved with the other levels' (a
serpentine over the strategy's whole span), so the machine's drift during the span is inside every
level. Resampling whole rounds with replacement and pooling them as the report pools a level gives
the spread of that level's percentile from run to run of the same sweep:

    round_spread([values of round 1, ..., round R], q)  ->  sd of the pooled q-th percentile / its value

Its use: a model that predicted every level's expectation exactly would still show a median
|predicted / measured - 1| of about `MEDIAN_ABS_PER_SD` x that spread (a normal's median absolute
deviation), so a leave-one-level-out error well above it is the model's (or drift between the
levels' rounds), not the held-out level's own measurement noise. The i.i.d. bootstrap over requests
(reports.stats) would miss the rounds' drift: requests of one round share it.

Pure: arrays in, numbers out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MEDIAN_ABS_PER_SD = 0.674   # median |N(0, 1)|
RESAMPLES = 400


def round_spread(rounds: Sequence[np.ndarray], q: float, *, resamples: int = RESAMPLES,
                 seed: int = 0) -> float | None:
    """Relative sd of the q-th percentile (0-100) of the pooled rounds under a bootstrap of whole
    rounds; None with fewer than two non-empty rounds (one window has no spread between rounds)."""
    parts = [np.asarray(r, dtype=float) for r in rounds]
    parts = [r[np.isfinite(r)] for r in parts]
    parts = [r for r in parts if len(r)]
    if len(parts) < 2:
        return None
    pooled = float(np.percentile(np.concatenate(parts), q))
    if not pooled:
        return None
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(parts), size=(resamples, len(parts)))
    values = [np.percentile(np.concatenate([parts[i] for i in pick]), q) for pick in picks]
    return float(np.std(values) / abs(pooled))
