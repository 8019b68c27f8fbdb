"""The core-0 FIFO replay: the closed-form Lindley recursion, queueing closed forms, and a fit that
recovers known work."""

import math

import numpy as np
import pytest

from lab.reports.core_queue import FIRST, LAST, SEND, STEP, CoreWork, core_jobs, fifo_completions, fit_work, replay


def _lindley(arrival, work):
    done, free = [], -math.inf
    for a, w in zip(arrival, work):
        free = max(a, free) + w
        done.append(free)
    return np.array(done)


def test_the_closed_form_is_the_recursion():
    rng = np.random.default_rng(1)
    arrival = np.cumsum(rng.exponential(1e-3, 5000))
    work = rng.exponential(0.9e-3, 5000)
    assert np.allclose(fifo_completions(arrival, work), _lindley(arrival, work), rtol=0, atol=1e-12)


def test_epoch_times_keep_their_precision():
    # at 1.8e9 s one ulp is 0.24 us: a recursion there drifts by several (1.7 us here); the closed form
    # sums relative to the first arrival, so only the shifted inputs and the result are rounded
    rng = np.random.default_rng(1)
    arrival = np.cumsum(rng.exponential(1e-3, 5000))
    work = rng.exponential(0.9e-3, 5000)
    shifted = fifo_completions(1.8e9 + arrival, work) - 1.8e9
    assert np.allclose(shifted, _lindley(arrival, work), rtol=0, atol=5e-7)   # two ulps


def test_m_m_1_waits_match_their_closed_form_mean_and_p99():
    # M/M/1 at rho = 0.8: mean wait rho / (mu - lambda); P(W > t) = rho exp(-(mu - lambda) t)
    lam, mu, n = 800.0, 1000.0, 400_000
    rng = np.random.default_rng(7)
    arrival = np.cumsum(rng.exponential(1 / lam, n))
    work = rng.exponential(1 / mu, n)
    wait = (fifo_completions(arrival, work) - work - arrival)[n // 10:]
    rho = lam / mu
    assert wait.mean() == pytest.approx(rho / (mu - lam), rel=0.05)
    assert np.percentile(wait, 99) == pytest.approx(math.log(100 * rho) / (mu - lam), rel=0.05)


def test_m_d_1_mean_wait_is_pollaczek_khinchine():
    lam, d, n = 600.0, 1e-3, 400_000
    rng = np.random.default_rng(3)
    arrival = np.cumsum(rng.exponential(1 / lam, n))
    wait = fifo_completions(arrival, np.full(n, d)) - d - arrival
    rho = lam * d
    assert wait[n // 10:].mean() == pytest.approx(rho * d / (2 * (1 - rho)), rel=0.05)


def test_a_step_message_is_handled_before_the_first_token_it_carries():
    jobs = core_jobs(send=[0.0], first_token=[1.0], finish=[2.0], step_end=[1.0, 2.0], step_sequences=[1, 1])
    assert list(jobs.kind) == [SEND, STEP, FIRST, STEP, LAST]
    work = CoreWork(send_s=0.1, first_s=0.2, last_s=0.3, step_s=0.05, token_s=0.01)
    in_s, first_out, last_out = replay(jobs, work)[:, 0]
    assert (in_s, first_out, last_out) == pytest.approx((0.1, 0.06 + 0.2, 0.06 + 0.3))


def test_a_request_waits_behind_another_ones_work():
    jobs = core_jobs(send=[0.0, 0.05], first_token=[5.0, 6.0], finish=[7.0, 8.0], step_end=[], step_sequences=[])
    delays = replay(jobs, CoreWork(send_s=0.1, first_s=0.0, last_s=0.0, step_s=0.0, token_s=0.0))
    assert delays[0] == pytest.approx([0.1, 0.15])   # the second sent at 0.05 waits until 0.1


def _synthetic_run(rng, users: int, start: float, seconds: float):
    """A run's events at one load: `users` closed-loop streams of 1 ms steps, 20 tokens a request."""
    steps = np.arange(start, start + seconds, 1e-3)
    send, first, finish = [], [], []
    for u in range(users):
        t = start + rng.uniform(0, 0.01)
        while t + 0.03 < start + seconds:
            send.append(t)
            first.append(t + 0.004)
            finish.append(t + 0.024)
            t += 0.03 + rng.uniform(0, 0.005)
    return send, first, finish, steps, np.full(len(steps), float(users))


def test_fit_work_recovers_the_work_that_made_the_delays():
    rng = np.random.default_rng(0)
    parts = [_synthetic_run(rng, users, 10.0 * k, 8.0) for k, users in enumerate((1, 3, 6))]
    send, first, finish, step_end, sequences = (np.concatenate([p[i] for p in parts]) for i in range(5))
    level = np.concatenate([np.full(len(p[0]), k) for k, p in enumerate(parts)])
    jobs = core_jobs(send, first, finish, step_end, sequences)
    truth = CoreWork(send_s=1.2e-3, first_s=0.6e-3, last_s=0.4e-3, step_s=0.25e-3, token_s=0.05e-3)
    measured = replay(jobs, truth)
    fitted = fit_work(jobs, measured, [level == k for k in range(3)])
    assert [getattr(fitted, f) for f in vars(truth)] == pytest.approx([getattr(truth, f) for f in vars(truth)],
                                                                     rel=0.02)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="one length"):
        core_jobs([0.0], [1.0, 2.0], [3.0], [], [])
    with pytest.raises(ValueError, match="finite"):
        core_jobs([math.nan], [1.0], [2.0], [], [])
    with pytest.raises(ValueError, match=">= 0"):
        CoreWork(-1.0, 0.0, 0.0, 0.0, 0.0)
