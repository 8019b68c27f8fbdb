"""Step-time fits on synthetic steps with known noise recover the model and the noise; the front-end fit.

Steps: a known StepTimeModel (a per-batch-size table that bends at small batches, a prompt-token and a
context-token cost) times known noise (lognormal, plus rare 6x spikes that come in bursts). The
robust fit with a batch table must recover the costs, and its residuals (kept in order for the block
bootstrap) must have the noise's distribution.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from calculators.sim.calibrate import closed_loop_think_s, fit_front_end, fit_step_model
from calculators.sim.front_end import FrontEnd, FrontEndByLoad
from calculators.sim.step_model import StepTimeModel

TRUE = StepTimeModel(base_s=0.001, per_seq_s=0.0001, per_prefill_token_s=1.2e-5, per_context_token_s=2e-7,
                     batch_table=(0.00100, 0.00118, 0.00131, 0.00140, 0.00149, 0.00158, 0.00167, 0.00176))


def synthetic_steps(n: int = 40_000, seed: int = 0):
    rng = np.random.default_rng(seed)
    batch = rng.integers(1, 9, n)
    prefill = np.where(rng.random(n) < 0.15, rng.integers(16, 128, n), 0)
    context = batch * rng.integers(20, 200, n)
    mean = np.array([TRUE.step_s(int(b), int(p), int(c)) for b, p, c in zip(batch, prefill, context)])
    noise = rng.lognormal(0.0, 0.08, n)
    burst = np.zeros(n, dtype=bool)
    for start in rng.integers(0, n - 20, 40):   # 40 bursts of 20 slow steps
        burst[start:start + 20] = True
    noise = np.where(burst, noise * 6.0, noise)
    return batch, prefill, context, mean * noise, noise


def test_robust_fit_recovers_the_costs_and_the_noise():
    batch, prefill, context, measured, noise = synthetic_steps()
    model = fit_step_model(batch, measured, prefill, context, jitter_block=32, robust=True, batch_table=True)
    median_noise = float(np.median(noise))
    assert len(model.batch_table) == 8
    np.testing.assert_allclose(model.batch_table, np.array(TRUE.batch_table) * median_noise, rtol=0.03)
    assert model.per_prefill_token_s == pytest.approx(TRUE.per_prefill_token_s * median_noise, rel=0.08)
    factors = np.asarray(model.jitter) * median_noise    # the fit's typical step is the median one
    assert len(factors) == len(measured) and model.jitter_block == 32
    assert stats.ks_2samp(factors, noise).statistic < 0.02
    assert np.percentile(factors, 99) == pytest.approx(np.percentile(noise, 99), rel=0.05)
    slow = np.asarray(model.jitter) > 3   # the bursts stay together, in order, for the block bootstrap
    assert slow.sum() == pytest.approx(800, rel=0.05)
    assert np.mean(slow[1:][slow[:-1]]) > 0.9


def test_plain_least_squares_keeps_the_mean_and_quantile_jitter_still_works():
    batch, prefill, context, measured, _ = synthetic_steps(seed=1)
    model = fit_step_model(batch, measured, prefill, context, jitter_points=101)
    assert len(model.jitter) == 101 and model.jitter == tuple(sorted(model.jitter)) and model.jitter_block == 1
    modelled = np.array([model.step_s(int(b), int(p), int(c)) for b, p, c in zip(batch, prefill, context)])
    assert modelled.mean() == pytest.approx(measured.mean(), rel=0.02)


def test_front_end_delays_are_client_minus_engine_times():
    send = np.array([0.0, 1.0, 2.0])
    front = fit_front_end(send, [0.010, 0.012, 0.011], [0.100, 0.090, 0.120], send + [0.002, 0.003, 0.0],
                          send + [0.008, 0.010, 0.0105], send + [0.099, 0.088, 0.12001], think_s=0.0004)
    assert front.in_s == pytest.approx((0.002, 0.003, 0.0))
    assert front.first_out_s == pytest.approx((0.002, 0.002, 0.0005))
    assert front.last_out_s == pytest.approx((0.001, 0.002, 0.0))   # -10 us of clock crossing floored at 0
    assert front.think_s == 0.0004


def test_closed_loop_think_time_from_littles_law():
    # 4 users, 10 s, each cycle 0.101 s (0.1 s request + 1 ms think): about 4 x 99 - 4 complete in the window
    assert closed_loop_think_s(4, 10.0, 392, 0.1) == pytest.approx(0.001, abs=0.0003)
    with pytest.raises(ValueError):
        closed_loop_think_s(0, 10.0, 10, 0.1)


def test_front_end_by_load_follows_a_queue_over_throughput():
    def level(mean: float) -> FrontEnd:
        return FrontEnd((mean * 0.5, mean, mean * 1.5), (mean,) * 3, (mean / 2,) * 3)

    capacity, d0, k = 1000.0, 0.001, 0.0005
    tps = (100.0, 300.0, 600.0, 850.0)
    means = [d0 + k * x / (capacity - x) for x in tps]
    table = FrontEndByLoad((1, 2, 4, 8), tuple(level(m) for m in means), tps)
    assert table.curve["capacity_tokens_per_s"] == pytest.approx(capacity, rel=0.05)
    held_out = 450.0   # between the second and third level
    at = table.at(3, tokens_per_s=held_out)
    assert np.mean(at.in_s) == pytest.approx(d0 + k * held_out / (capacity - held_out), rel=0.05)
    assert table.at(2, tokens_per_s=300.0).in_s == pytest.approx(level(means[1]).in_s)   # a measured level: itself
    two = FrontEndByLoad((1, 4), (level(0.001), level(0.003)), (100.0, 600.0))
    assert two.curve is None and np.mean(two.at(2).first_out_s) == pytest.approx(0.002)   # log-load midpoint


def test_an_open_loop_burst_meets_the_front_end_at_its_own_streams_in_flight():
    def level(users: float) -> FrontEnd:
        return FrontEnd((0.001 * users,) * 3, (0.002 * users,) * 3, (0.0005 * users,) * 3)   # 1 ms a stream in

    users = (1, 2, 4, 8, 16)
    table = FrontEndByLoad(users, tuple(level(u) for u in users))
    mean = table.at(2.0, burst_window_s=0.1)
    assert np.mean(mean.in_s) == pytest.approx(0.002, rel=0.01)
    # sends 0.1 s apart meet one stream each; four inside one window meet 1, 2, 3 and 4
    factors = mean.burst_factors(np.array([0.0, 0.2, 0.4, 1.0, 1.01, 1.02, 1.03]))
    assert factors[0] == pytest.approx([0.5, 0.5, 0.5, 0.5, 1.0, 1.5, 2.0], rel=0.02)
    assert factors[1] == pytest.approx(factors[0], rel=0.02)
    assert FrontEnd((0.001,), (0.001,), (0.001,)).burst_factors(np.array([0.0, 0.001])).tolist() == [[1.0, 1.0]] * 3
    with pytest.raises(ValueError, match="burst"):
        FrontEnd((0.001,), (0.001,), (0.001,), burst=((1.0, 1.0, 1.0, 1.0),), burst_window_s=0.0)
