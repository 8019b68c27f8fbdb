"""How many pairs a comparison needs, from a pilot's spread of per-pair log ratios. Pure.

Detecting a true change of `min_effect` (e.g. 10%) with a two-sided test at level alpha
and power 1 - beta needs, for per-pair log ratios with standard deviation sigma,

    n = ((z_{1 - alpha/2} + z_{1 - beta}) x sigma / log(1 + min_effect))^2 / ARE

pairs (the paired-t sample size; ARE = 3/pi ~ 0.955 is the Wilcoxon signed-rank test's
asymptotic efficiency against the t test under normal noise, so it needs n / 0.955).
The pilot's sigma comes from few pairs, so it is itself uncertain; the plan uses the
upper end of its 80% chi-square interval rather than the point estimate. Sigma is the
robust one (1.4826 x MAD): the verdict's estimate ignores the odd disturbed pair, and
so does the plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from reports.paired.stats import MIN_PAIRS

WILCOXON_ARE = 3 / math.pi
POWER = 0.90


@dataclass(frozen=True)
class PowerPlan:
    """Pairs needed to detect `min_effect`, and the wall time they take.

    Attributes:
        metric: the metric whose spread set the plan (the noisiest gated one).
        sigma: pilot SD of its per-pair log ratios; sigma_planned: the upper-80% bound used.
        pairs: pairs needed (at least `min_pairs`).
        seconds: pairs x seconds per pair.
    """

    metric: str
    sigma: float
    sigma_planned: float
    min_effect: float
    alpha: float
    power: float
    pairs: int
    seconds: float


def sigma_upper(sample_sd: float, n: int, coverage: float = 0.8) -> float:
    """Upper end of the one-sided `coverage` chi-square interval of a normal SD from n values."""
    if n < 2:
        return sample_sd
    dof = n - 1
    return sample_sd * math.sqrt(dof / sps.chi2.ppf(1 - coverage, dof))


def pairs_needed(sigma: float, min_effect: float, *, alpha: float = 0.05, power: float = POWER) -> int:
    """The formula in the module docstring, rounded up."""
    if not 0 < min_effect < 10:
        raise ValueError(f"--min-effect must be a positive fraction, got {min_effect!r}")
    if sigma <= 0:
        return 1
    z = sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)
    return math.ceil((z * sigma / math.log1p(min_effect)) ** 2 / WILCOXON_ARE)


def plan(pilot_log_ratios: dict[str, np.ndarray], *, min_effect: float, seconds_per_pair: float,
         alpha: float = 0.05, power: float = POWER, min_pairs: int = 6) -> PowerPlan:
    """The plan for the noisiest metric among `pilot_log_ratios` ({metric: per-pair log ratios})."""
    best: PowerPlan | None = None
    for metric, r in pilot_log_ratios.items():
        r = np.asarray(r, dtype=np.float64)
        r = r[np.isfinite(r)]
        if len(r) < 2:
            continue
        sd = float(sps.median_abs_deviation(r, scale="normal")) or float(r.std(ddof=1))
        planned = sigma_upper(sd, len(r))
        # never below the fewest pairs the test judges at all (fewer is always UNKNOWN)
        pairs = max(min_pairs, MIN_PAIRS, pairs_needed(planned, min_effect, alpha=alpha, power=power))
        candidate = PowerPlan(metric, sd, planned, min_effect, alpha, power, pairs, pairs * seconds_per_pair)
        if best is None or candidate.pairs > best.pairs:
            best = candidate
    if best is None:
        raise ValueError("the pilot gave fewer than 2 usable pairs: no spread to plan from")
    return best
