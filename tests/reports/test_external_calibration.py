"""A calibration without the engine's step record: the step line from the client's TPOT and the
engine's prefill means, and the front end split by the engine's latency means."""

from __future__ import annotations

import numpy as np
import pytest

from calculators.sim.front_end import FrontEnd, FrontEndByLoad
from calculators.sim.step_model import StepTimeModel
from reports.external_calibration import fit_steps_from_levels, front_end_from_means, running_while_stepping, tpot_factors

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


def test_each_requests_tpot_over_the_levels_mean_is_its_noise_for_every_one_of_its_decode_steps():
    factors = tpot_factors(np.array([0.010, 0.020, np.nan, 0.030]), np.array([5, 3, 9, 1]))
    # decode time 4 x 10 ms + 2 x 20 ms over 6 steps: 13.3 ms a step; no TPOT or one token: no steps
    assert factors == pytest.approx([0.75] * 4 + [1.5] * 2)
    assert factors.mean() == pytest.approx(1.0)
    assert tpot_factors(np.array([np.nan]), np.array([4])).size == 0
