"""The step residuals split into the machine's slow speed (per bin of wall time) and the fast rest."""

from __future__ import annotations

import numpy as np
import pytest

from calculators.sim.step_noise import split_slow

STEP_S = 0.001


def synthetic(slow_by_second: list[float], fast_sd: float, seed: int = 0):
    """Steps of 1 ms modelled, back to back, on a machine whose speed is constant within each second."""
    rng = np.random.default_rng(seed)
    measured, starts, t = [], [], 0.0
    while t < len(slow_by_second):
        duration = STEP_S * slow_by_second[int(t)] * rng.lognormal(0.0, fast_sd)
        starts.append(t)
        measured.append(duration)
        t += duration
    measured = np.array(measured)
    return measured, np.full(len(measured), STEP_S), np.array(starts)


def test_a_known_slow_path_and_fast_spread_are_recovered():
    measured, modelled, starts = synthetic([1.0, 1.0, 1.8, 1.8, 1.0], fast_sd=0.05)
    (path,), fast = split_slow(measured, modelled, starts, None, bin_s=0.25)
    assert len(path) == 20
    expected = np.repeat([1.0, 1.0, 1.8, 1.8, 1.0], 4) * np.exp(0.05 ** 2 / 2)   # a lognormal's mean
    np.testing.assert_allclose(path, expected, rtol=0.02)
    assert np.std(np.log(fast)) == pytest.approx(0.05, rel=0.1)
    assert np.mean(fast) == pytest.approx(1.0, abs=0.005)


def test_model_times_slow_times_fast_puts_back_every_step():
    measured, modelled, starts = synthetic([1.0, 1.5, 0.9], fast_sd=0.2, seed=1)
    window = (starts > 1.5).astype(int)               # two windows (a level's rounds)
    paths, fast = split_slow(measured, modelled, starts, window, bin_s=0.25)
    assert len(paths) == 2
    bins = np.concatenate([np.floor((starts[window == w] - starts[window == w][0]) / 0.25).astype(int)
                           for w in (0, 1)])
    slow = np.concatenate([np.asarray(paths[w])[bins[window == w]] for w in (0, 1)])
    np.testing.assert_allclose(modelled * slow * fast, measured, rtol=1e-12)


def test_a_sparse_bin_carries_the_one_before_and_unusable_steps_are_left_out():
    starts = np.array([0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.30, 0.31, 0.6])
    measured = np.full(len(starts), 0.002)
    measured[10:12] = 0.010                           # two slow steps alone in their bin: too few to trust
    modelled = np.full(len(starts), 0.001)
    modelled[-1] = 0.0                                # a step the model gives no time
    (path,), fast = split_slow(measured, modelled, starts, None, bin_s=0.25, min_steps=8)
    assert path == pytest.approx((2.0, 2.0))          # the last step (bin 2) is out; bin 1 carries bin 0
    assert fast[10] == pytest.approx(5.0)             # the sparse bin's spread stays in the fast part
    assert np.isnan(fast[-1])


def test_a_bin_width_must_be_positive():
    with pytest.raises(ValueError, match="bin_s"):
        split_slow(np.ones(3), np.ones(3), np.arange(3.0), None, bin_s=0.0)


def test_rows_out_of_time_order_give_the_path_in_time_order():
    measured, modelled, starts = synthetic([1.0, 2.0], fast_sd=0.01, seed=3)
    order = np.random.default_rng(0).permutation(len(starts))
    (path,), fast = split_slow(measured[order], modelled[order], starts[order], None, bin_s=0.25)
    np.testing.assert_allclose(path, np.repeat([1.0, 2.0], 4), rtol=0.01)
    (in_order,), fast_in_order = split_slow(measured, modelled, starts, None, bin_s=0.25)
    np.testing.assert_allclose(fast, fast_in_order[order])
