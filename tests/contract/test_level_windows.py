import numpy as np
import pytest

from contract.level_windows import inside, level_windows, serpentine, span, total_s


def test_one_window_per_round_from_first_send_to_last_completion():
    t_start = [10.0, 11.0, 30.0, 31.0, 12.0]
    t_end = [10.5, 13.0, 30.2, np.nan, 12.5]          # a record without an end counts at its send
    rounds = [0, 0, 1, 1, None]                        # no round: round 0
    windows = level_windows(t_start, t_end, rounds)
    assert windows == [(10.0, 13.0), (30.0, 31.0)]
    assert total_s(windows) == pytest.approx(4.0) and span(windows) == (10.0, 31.0)
    assert level_windows(t_start, t_end) == [(10.0, 31.0)]   # without rounds: one window over everything
    assert level_windows([], []) == [] and span([]) is None and total_s([]) == 0.0


def test_times_inside_any_window_and_the_serpentine_order():
    assert inside([9.0, 10.0, 20.0, 30.5, 32.0], [(10.0, 13.0), (30.0, 31.0)]).tolist() == [
        False, True, False, True, False]
    assert serpentine([1, 2, 4], 0) == [1, 2, 4] and serpentine([1, 2, 4], 1) == [4, 2, 1]
