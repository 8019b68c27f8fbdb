"""Open-loop schedules: seeded, at the asked rate, with the asked gap distribution (KS test)."""

import numpy as np
import pytest
from scipy import stats

from contract.arrivals import ArrivalProcess, iter_offsets, my_share, parse_arrival, schedule_offsets


@pytest.mark.parametrize("spec", ["poisson", "gamma:2.0", "gamma:0.5"])
def test_schedule_rate_and_gap_distribution(spec):
    process = parse_arrival(spec, 50.0)
    offsets = schedule_offsets(process, seed=11, n=20000)
    assert offsets[0] == 0.0 and np.all(np.diff(offsets) >= 0)
    achieved = (len(offsets) - 1) / offsets[-1]
    assert achieved == pytest.approx(50.0, rel=0.05)
    name, args = process.scipy_distribution()
    assert stats.kstest(np.diff(offsets), name, args=args).pvalue > 0.01
    # the test has power: a Poisson schedule is not gamma with CV 2
    if spec == "poisson":
        wrong = parse_arrival("gamma:2.0", 50.0).scipy_distribution()
        assert stats.kstest(np.diff(offsets), wrong[0], args=wrong[1]).pvalue < 1e-6


def test_constant_schedule_is_exact():
    offsets = schedule_offsets(parse_arrival("constant", 4.0), seed=0, n=9)
    assert np.allclose(offsets, np.arange(9) * 0.25)


def test_schedule_is_reproducible_and_block_independent():
    process = parse_arrival("poisson", 10.0)
    a = schedule_offsets(process, 5, 3000)
    it = iter_offsets(process, 5)
    b = np.array([next(it) for _ in range(3000)])
    assert np.array_equal(a, b)
    assert not np.array_equal(a, schedule_offsets(process, 6, 3000))


def test_shares_partition_the_schedule():
    owners = [[p for p in range(3) if my_share(i, p, 3)] for i in range(30)]
    assert all(len(o) == 1 for o in owners)


@pytest.mark.parametrize("spec, rate, message", [
    ("poisson", None, "--rate"), ("poisson", 0.0, "--rate"), ("gamma", 1.0, "coefficient"),
    ("gamma:x", 1.0, "not a number"), ("gamma:-1", 1.0, "CV"), ("burst", 1.0, "not one of"),
    ("closed:3", None, "no parameter"),
])
def test_bad_arrival_specs(spec, rate, message):
    with pytest.raises(ValueError, match=message):
        parse_arrival(spec, rate)


def test_closed_loop_has_no_schedule():
    assert not ArrivalProcess("closed").open_loop
    with pytest.raises(ValueError):
        next(iter_offsets(ArrivalProcess("closed"), 0))


@pytest.mark.parametrize("spec, cv2", [("poisson", 1.0), ("gamma:2.0", 4.0), ("gamma:0.5", 0.25), ("constant", 0.0)])
def test_cv2_is_the_gaps_own(spec, cv2):
    """The one cv² rule (the simulator's gamma gaps take it): the schedule's gaps have it."""
    process = parse_arrival(spec, 50.0)
    gaps = np.diff(schedule_offsets(process, seed=3, n=40000))
    assert gaps.var() / gaps.mean() ** 2 == pytest.approx(cv2, rel=0.08, abs=1e-9)
    assert process.cv2 == pytest.approx(cv2, abs=1e-6) and process.cv2 > 0
    with pytest.raises(ValueError, match="closed-loop"):
        parse_arrival("closed", None).cv2
