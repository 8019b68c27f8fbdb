"""A calibration without the engine's step record: the step line from the client's TPOT and the
engine's prefill means, and the front end split by the engine's latency means."""

from __future__ import annotations

import numpy as np
import pytest

from calculators.sim.front_end import FrontEnd, FrontEndByLoad
from calculators.sim.step_model import StepTimeModel
from reports.predict.external_calibration import (batch_cost_table, client_step_noise, decode_step_mean_s, fit_steps_from_levels, front_end_from_means,
                                         running_while_stepping, step_in_progress_wait_s)

TRUE = StepTimeModel(base_s=0.006, per_seq_s=0.0002, per_prefill_token_s=4e-5)


def _level(batch: float, prompt_mean: float = 90.0, prompt_tokens_per_s: float = 0.0, prefill: bool = True) -> dict:
    """What a level of a continuous-batching engine following TRUE would measure."""
    # a decode step carries the prompts arriving during it: per_step = rate x step, solved for step
    step = (TRUE.base_s + TRUE.per_seq_s * batch) / (1 - TRUE.per_prefill_token_s * prompt_tokens_per_s)
    return {"batch": batch, "tpot_s": step, "prompt_tokens_per_s": prompt_tokens_per_s, "prompt_mean": prompt_mean,
            "prefill_s": TRUE.step_s(round(batch), prompt_mean) if prefill else None}


def test_the_step_line_and_the_prompts_cost_come_back_from_tpot_and_prefill_means():
    levels = [_level(b, prompt_mean=p, prompt_tokens_per_s=r)
              for b, p, r in ((1, 90, 150), (2, 80, 300), (4, 95, 550), (8, 85, 1000), (16, 90, 1700))]
    model, used_prefill = fit_steps_from_levels(levels)
    assert used_prefill
    assert model.base_s == pytest.approx(TRUE.base_s, rel=0.02)
    assert model.per_seq_s == pytest.approx(TRUE.per_seq_s, rel=0.05)
    assert model.per_prefill_token_s == pytest.approx(TRUE.per_prefill_token_s, rel=0.05)


def test_without_prefill_means_the_prompts_cost_nothing_and_tpot_alone_sets_the_line():
    levels = [_level(b, prefill=False) for b in (1, 4, 16)]
    model, used_prefill = fit_steps_from_levels(levels)
    assert not used_prefill and model.per_prefill_token_s == 0.0
    assert model.step_s(1) == pytest.approx(TRUE.step_s(1), rel=1e-6)
    assert model.step_s(16) == pytest.approx(TRUE.step_s(16), rel=1e-6)


def test_one_batch_size_cannot_fix_a_line():
    with pytest.raises(ValueError, match="distinct batch sizes"):
        fit_steps_from_levels([_level(4), _level(4)])


def test_the_batch_is_the_running_gauge_while_stepping_else_the_users():
    assert running_while_stepping(0.875, "concurrency", 1, 32) == 1.0     # the gauge read 0 between requests
    assert running_while_stepping(25.0, "concurrency", 32, 32) == 25.0    # the others were in the front end
    assert running_while_stepping(None, "concurrency", 64, 32) == 32.0    # capped by the strategy
    assert running_while_stepping(None, "rate_rps", 5.0, 32) == 1.0


def test_the_front_end_gets_what_the_client_saw_beyond_the_engines_means():
    ttft = np.array([0.030, 0.025, 0.008, np.nan])
    e2e = np.array([0.330, 0.300, 0.280, 0.400])
    front = front_end_from_means(ttft, e2e, {"queue_s": 0.001, "prefill_s": 0.009, "decode_s": 0.250}, think_s=0.002)
    assert front.in_s == pytest.approx((0.020, 0.015, 0.0))                 # the unfinished request left out, floored at 0
    assert front.first_out_s == (0.0, 0.0, 0.0)
    assert front.last_out_s == pytest.approx(((0.300 + 0.275 + 0.272) / 3 - 0.250,) * 3)   # mean decode beyond the engine's
    assert front.think_s == 0.002
    assert front_end_from_means(ttft, e2e, {"queue_s": 0.001}) is None      # no prefill or decode means: no split


def test_a_delay_measured_as_zero_at_every_level_stays_zero_and_the_others_still_follow_the_load():
    def level(in_s: float, out_s: float) -> FrontEnd:
        return FrontEnd((in_s,) * 10, (0.0,) * 10, (out_s,) * 10)
    tokens = (140.0, 280.0, 510.0, 960.0)
    fronts = (level(0.018, 0.0), level(0.020, 0.003), level(0.025, 0.004), level(0.033, 0.006))   # one out_s floored to 0
    by_load = FrontEndByLoad((1, 2, 4, 8), fronts, tokens)
    assert by_load.curve is not None and by_load.curve["first_out_s"]["d0_s"] == by_load.curve["first_out_s"]["k_s"] == 0.0
    between = by_load.at(6, 750.0)
    assert set(between.first_out_s) == {0.0}
    assert 0.025 < between.mean_s["in_s"] < 0.033


def test_the_decode_step_mean_is_decode_time_over_decode_steps_the_mean_the_factors_are_taken_around():
    tpot, out = np.array([0.010, 0.020, np.nan, 0.030]), np.array([5, 3, 9, 1])
    assert decode_step_mean_s(tpot, out) == pytest.approx((4 * 0.010 + 2 * 0.020) / 6)   # not the p50 (0.015)
    assert decode_step_mean_s(np.array([np.nan]), np.array([4])) is None


def test_the_wait_for_the_step_in_progress_is_half_a_step_when_another_request_keeps_the_engine_busy():
    assert step_in_progress_wait_s(0.004, 0.93, "concurrency", 1) == 0.0          # one user: the engine waits for it
    # two users, each running 0.94 of the time: the other one is running at 94% of arrivals
    assert step_in_progress_wait_s(0.004, 1.88, "concurrency", 2) == pytest.approx(0.002 * 0.94)
    assert step_in_progress_wait_s(0.004, 6.4, "concurrency", 8) == pytest.approx(0.002 * (1 - 0.2 ** 7))
    assert step_in_progress_wait_s(0.004, 0.3, "rate_rps", 5.0) == pytest.approx(0.002 * 0.3)   # the busy share
    assert step_in_progress_wait_s(0.004, 3.0, "rate_rps", 50.0) == pytest.approx(0.002)
    assert step_in_progress_wait_s(None, 3.0, "rate_rps", 50.0) == step_in_progress_wait_s(0.004, None, "rate_rps", 5) == 0.0


def test_the_front_end_leaves_out_the_wait_the_simulator_times_itself():
    ttft, e2e = np.array([0.030, 0.025]), np.array([0.330, 0.300])
    engine = {"queue_s": 0.001, "prefill_s": 0.009, "decode_s": 0.250}
    front = front_end_from_means(ttft, e2e, engine, step_wait_s=0.002)
    assert front.in_s == pytest.approx((0.018, 0.013))


def test_the_clients_tpot_splits_into_the_machines_slow_speed_per_round_and_a_fast_rest():
    # round 0: eight requests a second for 2 s, the second second twice as slow; round 1: one speed.
    # Each request 11 tokens (10 decode steps); within a bin the fast part alternates 0.9 / 1.1.
    first = np.concatenate([np.arange(16) / 8, 100 + np.arange(8) / 8])
    fast = np.tile([0.9, 1.1], 12)
    slow = np.concatenate([np.ones(8), 2 * np.ones(8), np.ones(8)])
    tpot = 0.004 * fast * slow
    paths, factors = client_step_noise(tpot, np.full(24, 11), first, np.repeat([0, 1], [16, 8]), bin_s=0.5)
    mean = decode_step_mean_s(tpot, np.full(24, 11))
    level = 0.004 / mean     # the level's mean is the slow rounds' too: every factor is relative to it
    assert len(paths) == 2 and paths[0] == pytest.approx((level,) * 2 + (2 * level,) * 2) and paths[1] == pytest.approx((level,) * 2)
    assert factors.shape == (240,) and factors[::10] == pytest.approx(fast)   # each request's, over its 10 steps
    assert client_step_noise(np.array([np.nan]), np.array([5]), np.array([0.0]), None, 0.25)[1].size == 0


def test_the_batch_cost_table_follows_the_levels_never_falling_with_the_batch():
    # vLLM's CPU build: flat to b=4, then rising; one level (b=2) drifted 10% high
    table = batch_cost_table(np.array([6.0, 1.0, 2.0, 4.0, 12.0]), np.array([0.0034, 0.0032, 0.0036, 0.0034, 0.0046]))
    # b=2 and b=4 pooled to their mean (b=6 too: 0.0034 is below it), then interpolated; 12 sizes
    assert len(table) == 12 and table[0] == pytest.approx(0.0032)
    assert table[1] == table[3] == table[5] == pytest.approx((0.0036 + 0.0034 + 0.0034) / 3)
    assert table[8] == pytest.approx(table[5] + (0.0046 - table[5]) * 3 / 6) and table[11] == pytest.approx(0.0046)
    assert all(b >= a for a, b in zip(table, table[1:]))
    assert batch_cost_table(np.array([0.9, 2.5]), np.array([0.003, 0.004]))[0] == pytest.approx(0.003 + 0.001 * 0.1 / 1.6)
