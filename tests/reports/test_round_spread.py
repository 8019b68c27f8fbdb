import numpy as np
import pytest

from reports.round_spread import round_spread


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
    assert round_spread([fast, slow], 50, resamples=4000) == pytest.approx(0.0707 / 1.1, rel=0.05)
