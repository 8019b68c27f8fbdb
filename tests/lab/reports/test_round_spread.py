import numpy as np
import pandas as pd
import pytest

from lab.reports.round_spread import MEDIAN_ABS_PER_SD, level_round_spreads, round_spread, rounds_floor


def test_rounds_that_agree_have_no_spread_and_one_round_has_none_to_give():
    same = np.linspace(0.01, 0.02, 50)
    assert round_spread([same, same.copy(), same.copy()], 99) == pytest.approx(0.0, abs=1e-12)
    assert round_spread([same], 50) is None
    assert round_spread([same, np.array([np.nan])], 50) is None   # the second round measured nothing


def test_a_round_run_20_percent_slower_moves_the_pooled_median_by_the_bootstrap_of_whole_rounds():
    # two rounds, one at 1.0 s and one at 1.2 s: resampled whole, the pooled median is 1.0, 1.1 or 1.2
    # with chances 1/4, 1/2, 1/4: sd 0.0707 over the pooled 1.1 (requests within a round share its speed,
    # so a bootstrap over requests would call this median exact)
    fast, slow = np.full(200, 1.0), np.full(200, 1.2)
    assert round_spread([fast, slow], 50) == pytest.approx(0.0707 / 1.1, rel=0.05)


def test_a_levels_spreads_come_from_its_rounds_and_a_strategys_floor_is_their_median():
    rng = np.random.default_rng(0)
    rounds = pd.DataFrame({"round": np.repeat([0, 1, 2, 3], 100),
                           "ttft_s": np.concatenate([rng.gamma(4, 0.002, 100) * speed for speed in (1.0, 1.1, 0.9, 1.05)])})
    spreads = level_round_spreads(rounds, ("ttft_s.p50", "ttft_s.p99"))
    assert set(spreads) == {"ttft_s.p50", "ttft_s.p99"} and 0.01 < spreads["ttft_s.p50"] < 0.2
    assert level_round_spreads(rounds.drop(columns="round"), ("ttft_s.p50",)) is None   # a run without rounds
    assert level_round_spreads(rounds[rounds["round"] == 0], ("ttft_s.p50",)) is None   # one round
    floor = rounds_floor([{"k": 0.02}, None, {"k": 0.04}, {"k": 0.10}], ("k",))
    assert floor == {"k": pytest.approx(MEDIAN_ABS_PER_SD * 0.04)}
    assert rounds_floor([None, None], ("k",)) is None
