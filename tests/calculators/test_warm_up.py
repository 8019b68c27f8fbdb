"""The engine's warm-up after a wait: counting steps since the wait, and recovering a known curve."""

from __future__ import annotations

import numpy as np
import pytest

from calculators.sim.warm_up import MIN_WAITS, WARM_STEPS, fit_warm_up, steps_since_idle, without_warm_up

TRUE = np.array([1.4, 1.2, 1.1, 1.08] + [1.05] * 4 + [1.02] * 8)   # one factor per group, as fitted


def test_steps_count_from_the_wait_before_them():
    idle_after = np.array([False, False, True, False, False, True, True, False])
    assert steps_since_idle(idle_after).tolist() == [0, 1, 2, 0, 1, 2, 0, 0]
    assert steps_since_idle(np.array([], dtype=bool)).tolist() == []


def synthetic(waits: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Busy stretches of 60 steps, each after a wait: factors lognormal(0, 0.1) x the warm-up."""
    rng = np.random.default_rng(seed)
    since = np.tile(np.arange(60), waits)
    fast = rng.lognormal(0.0, 0.1, len(since))
    warm = since < WARM_STEPS
    fast[warm] *= TRUE[since[warm]]
    return fast, since


def test_a_known_warm_up_is_recovered_and_divided_out():
    fast, since = synthetic(400)
    curve = np.asarray(fit_warm_up(fast, since))
    assert len(curve) == WARM_STEPS
    assert curve == pytest.approx(TRUE, rel=0.02)
    rest = without_warm_up(fast, since, tuple(curve))
    assert np.std(np.log(rest)) == pytest.approx(0.1, rel=0.05)   # the noise left is the noise put in
    assert rest[since == 0].mean() == pytest.approx(rest[since >= WARM_STEPS].mean(), rel=0.02)


def test_too_few_waits_fit_nothing_and_nothing_is_divided_out():
    fast, since = synthetic(MIN_WAITS - 1)
    assert fit_warm_up(fast, since) == ()
    assert np.array_equal(without_warm_up(fast, since, ()), fast)
    assert fit_warm_up(*synthetic(MIN_WAITS)) != ()
    # no step long after a wait: nothing to compare the warm steps with
    assert fit_warm_up(np.ones(100), np.zeros(100, dtype=int)) == ()
