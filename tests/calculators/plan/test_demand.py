"""The plan's demand: rate curves thinned into Poisson arrivals, trace rows, the diurnal generator, sessions."""

from __future__ import annotations

import time

import numpy as np
import pytest

from calculators.plan.demand import Demand, from_rows
from calculators.plan.demand_curves import diurnal_with_bursts, rate_curve_arrivals, with_sessions
from contract.distributions import LengthDistribution

FIXED = dict(prompt=LengthDistribution.fixed(100), output=LengthDistribution.fixed(20))
CURVE_T = [0.0, 100.0, 250.0, 400.0, 600.0]
CURVE_R = [50.0, 200.0, 0.0, 120.0, 120.0]


def _integral(t, rate, a: float, b: float) -> float:
    """The linear-between-points curve (holding its last rate) integrated over [a, b]: exact, the knots included."""
    knots = np.asarray(t, dtype=float)
    grid = np.unique(np.concatenate([[a, b], knots[(knots > a) & (knots < b)]]))
    values = np.interp(grid, knots, rate)   # np.interp holds the end values outside the knots
    return float(np.sum((values[1:] + values[:-1]) / 2 * np.diff(grid)))


@pytest.mark.parametrize("seed", range(5))
def test_counts_per_interval_match_the_rate_integral_within_poisson_noise(seed):
    # 20 bins of 35 s over 700 s: the curve's ramps up and down to 0 and back, and 100 s past its last
    # point (the last rate holds). Each bin's count is Poisson with mean its integral, so |N - mean| <= 4 sd
    # fails by chance with probability 6e-5 per bin: about 1 in 800 for 20 bins, whatever the seed (five
    # seeds show the bound is not tuned to one).
    demand = rate_curve_arrivals(CURVE_T, CURVE_R, **FIXED, seed=seed, duration_s=700)
    edges = np.linspace(0, 700, 21)
    counts = np.histogram(demand.t_s, edges)[0]
    expected = np.array([_integral(CURVE_T, CURVE_R, a, b) for a, b in zip(edges[:-1], edges[1:])])
    assert np.all(np.abs(counts - expected) <= 4 * np.sqrt(expected) + 1e-9), (counts, expected.round(1))
    assert demand.t_s.min() >= 0 and demand.t_s.max() < 700 and np.all(np.diff(demand.t_s) >= 0)
    assert demand.span_s == 700 and len(demand) == demand.prompt.size == demand.session.size


def test_arrivals_are_poisson_not_evenly_spread():
    # constant 100 rps for 1000 s: counts per second have variance = mean (Poisson); the index of dispersion
    # over 1000 bins has sd sqrt(2 / 999) = 0.045, so [0.8, 1.2] is over 4 sd either side
    demand = rate_curve_arrivals([0.0], [100.0], **FIXED, seed=3, duration_s=1000)
    counts = np.histogram(demand.t_s, np.arange(0, 1001))[0]
    assert 0.8 < counts.var() / counts.mean() < 1.2
    gaps = np.diff(demand.t_s)
    assert abs(gaps.std() / gaps.mean() - 1) < 0.05   # exponential gaps: cv 1


def test_seeded_reproducible_and_streams_independent():
    a = rate_curve_arrivals(CURVE_T, CURVE_R, **FIXED, seed=11)
    b = rate_curve_arrivals(CURVE_T, CURVE_R, **FIXED, seed=11)
    assert np.array_equal(a.t_s, b.t_s) and np.array_equal(a.prompt, b.prompt)
    assert not np.array_equal(a.t_s[:100], rate_curve_arrivals(CURVE_T, CURVE_R, **FIXED, seed=12).t_s[:100])
    # other lengths, sessions: the same send times
    c = rate_curve_arrivals(CURVE_T, CURVE_R, prompt=LengthDistribution.uniform(10, 900),
                            output=LengthDistribution.uniform(1, 50), seed=11, sessions=7, turns_prefix_tokens=64)
    assert np.array_equal(a.t_s, c.t_s) and c.prompt.min() >= 10 + 64 and c.output.max() <= 50
    assert "seed 11" in a.source and "uniform:10:900" in c.source and "7 sessions" in c.source


def test_speedup_divides_times_and_duration_cuts_in_sped_up_time():
    plain = rate_curve_arrivals(CURVE_T, CURVE_R, **FIXED, seed=5)
    fast = rate_curve_arrivals(CURVE_T, CURVE_R, **FIXED, seed=5, speedup=10)
    assert np.allclose(fast.t_s, plain.t_s / 10) and fast.span_s == pytest.approx(60)
    cut = rate_curve_arrivals(CURVE_T, CURVE_R, **FIXED, seed=5, speedup=10, duration_s=20)
    assert cut.t_s.max() < 20 and np.allclose(cut.t_s, plain.t_s[plain.t_s < 200] / 10)
    assert "speedup 10" in fast.source
    # past the curve's end the last rate holds, and a shorter run is still the longer one's beginning
    longer = rate_curve_arrivals(CURVE_T, CURVE_R, **FIXED, seed=5, speedup=10, duration_s=500)
    assert np.array_equal(longer.t_s[longer.t_s < 60], fast.t_s)
    assert np.array_equal(longer.t_s[longer.t_s < 300],
                          rate_curve_arrivals(CURVE_T, CURVE_R, **FIXED, seed=5, speedup=10, duration_s=300).t_s)
    tail = np.sum(longer.t_s >= 60)   # 440 s at 1200 rps (120 rps sped up 10 times)
    assert abs(tail - 440 * 1200) <= 4 * np.sqrt(440 * 1200)


def test_a_steep_long_ramp_is_drawn_in_chunks_and_stays_sorted():
    # one linear piece from 0 to 5000 rps over 1000 s: 2.5M requests, about 3.75M candidates (several chunks)
    demand = rate_curve_arrivals([0.0, 1000.0], [0.0, 5000.0], **FIXED, seed=9)
    assert abs(len(demand) - 2_500_000) <= 4 * np.sqrt(2_500_000) and np.all(np.diff(demand.t_s) >= 0)
    halves = np.histogram(demand.t_s, [0, 500, 1000])[0]   # integrals 625k and 1.875M
    assert np.all(np.abs(halves - [625_000, 1_875_000]) <= 4 * np.sqrt([625_000, 1_875_000]))


@pytest.mark.parametrize("t, rate, kwargs, message", [
    ([], [], {}, r"^rate curve: no rows$"),
    ([0, 10, 5, 20], [1, 1, 1, 1], {}, r"^rate curve: time goes backwards at row 3 \(5 after 10\)$"),
    ([0, 10, 10], [1, 1, 1], {}, r"^rate curve: time repeats at row 3 \(10\)"),
    ([0, 10, 20], [1, -2, 1], {}, r"^rate curve: negative rate at row 2 \(-2 rps\)$"),
    ([0, 10, 20], [0, 0, 0], {}, r"^rate curve: every rate is 0"),
    ([0, 10], [1], {}, r"^rate curve: 2 times but 1 rates$"),
    ([0, float("nan")], [1, 1], {}, r"^rate curve: time at row 2 is not a finite number"),
    ([0], [5], {}, r"^rate curve: one row is a constant rate: give a duration$"),
    ([0, 10], [1, 1], {"speedup": 0}, r"speedup must be a number > 0"),
    ([0, 10], [1, 1], {"turns_prefix_tokens": 64}, r"a turns prefix needs sessions > 0"),
])
def test_bad_curves_raise_one_line_naming_the_problem(t, rate, kwargs, message):
    with pytest.raises(ValueError, match=message) as err:
        rate_curve_arrivals(t, rate, **FIXED, seed=0, **kwargs)
    assert "\n" not in str(err.value)


def test_from_rows_sorts_speeds_up_cuts_and_keeps_hash_ids_as_prefixes():
    demand = from_rows([0.0, 30.0, 10.0, 50.0], [600, 700, 10, 5], [5, 9, 1, 2], [(0, 1), (0, 2), (), (7,)],
                       speedup=2, duration_s=20, source="mooncake trace m.jsonl")
    assert demand.t_s.tolist() == [0.0, 5.0, 15.0] and demand.prompt.tolist() == [600, 10, 700]
    assert demand.prefix == ((0, 1), (), (0, 2)) and demand.prefix_block_tokens == 512
    assert demand.session.tolist() == [-1, -1, -1] and demand.span_s == 20
    assert demand.source == "mooncake trace m.jsonl, speedup 2, first 20 s"
    plain = from_rows([1.0, 2.0], [3, 4], [5, 6], [(), ()])
    assert plain.prefix is None and plain.duration_s is None and plain.span_s == 2.0
    keyed = from_rows([0, 1, 2, 3], [1] * 4, [1] * 4, session=["s9", "", "s3", "s9"])
    assert keyed.session.tolist() == [0, -1, 1, 0]


def test_demand_checks_its_arrays_and_windows_keep_times():
    with pytest.raises(ValueError, match="go backwards at request 2"):
        Demand(np.array([0.0, 2.0, 1.0]), np.ones(3, int), np.ones(3, int), np.full(3, -1), None)
    with pytest.raises(ValueError, match="prompt has 2 entries, t_s has 3"):
        Demand(np.zeros(3), np.ones(2, int), np.ones(3, int), np.full(3, -1), None)
    with pytest.raises(ValueError, match="every output length must be >= 1"):
        Demand(np.zeros(2), np.ones(2, int), np.array([1, 0]), np.full(2, -1), None)
    demand = from_rows([0.0, 1.0, 2.0, 3.0], [1, 2, 3, 4], [1, 1, 1, 1], [(1,), (2,), (3,), (4,)])
    part = demand.window(1.0, 3.0)
    assert part.t_s.tolist() == [1.0, 2.0] and part.prefix == ((2,), (3,)) and len(part) == 2
    assert not part.t_s.flags.writeable and len(demand.window(10, 20)) == 0


def test_diurnal_peaks_where_it_should_and_bursts_multiply_the_base():
    t, rate = diurnal_with_bursts(peak_rps=10, trough_rps=2, duration_s=2 * 86400, bursts_per_day=0,
                                  burst_multiplier=3, burst_duration_s=600, seed=1)
    assert t[0] == 0 and t[-1] == 2 * 86400 and np.all(np.diff(t) > 0)
    assert t[np.argmax(rate)] == 43200 and rate.max() == pytest.approx(10) and rate[0] == pytest.approx(2)
    assert rate[np.searchsorted(t, 86400)] == pytest.approx(2) and rate.min() == pytest.approx(2)
    shifted_t, shifted = diurnal_with_bursts(peak_rps=10, trough_rps=2, duration_s=86400, bursts_per_day=0,
                                             burst_multiplier=3, burst_duration_s=600, seed=1, peak_at_s=50400)
    assert shifted_t[np.argmax(shifted)] == 50400   # 14:00
    burst_t, burst = diurnal_with_bursts(peak_rps=10, trough_rps=2, duration_s=2 * 86400, bursts_per_day=5,
                                         burst_multiplier=3, burst_duration_s=600, seed=1)
    base = 2 + 8 * (1 + np.cos(2 * np.pi * (burst_t - 43200) / 86400)) / 2
    lift = burst / base
    assert lift.min() == pytest.approx(1) and lift.max() == pytest.approx(3)
    lifted = np.diff(burst_t)[(lift[:-1] > 2.99) & (lift[1:] > 2.99)].sum()   # time at the full multiple
    assert 3 * 600 < lifted < 20 * 600   # Poisson(10) bursts of ~600 s each, overlaps merged
    again = diurnal_with_bursts(peak_rps=10, trough_rps=2, duration_s=2 * 86400, bursts_per_day=5,
                                burst_multiplier=3, burst_duration_s=600, seed=1)
    assert np.array_equal(again[1], burst)
    demand = rate_curve_arrivals(t, rate, **FIXED, seed=2, speedup=100)   # a 2-day curve in 1728 s
    hours = np.histogram(demand.t_s, np.linspace(0, 1728, 49))[0]
    assert np.argmax(hours[:24]) in (11, 12) and np.argmin(hours[:24]) in (0, 23)


@pytest.mark.parametrize("kwargs, message", [
    (dict(peak_rps=1, trough_rps=2), r"^diurnal: need peak_rps > 0 and trough_rps <= peak_rps"),
    (dict(trough_rps=-1), r"^diurnal: trough_rps must be >= 0"),
    (dict(duration_s=0), r"^diurnal: duration_s must be a number > 0"),
])
def test_bad_diurnal_parameters_raise(kwargs, message):
    args = dict(peak_rps=10, trough_rps=2, duration_s=3600, bursts_per_day=1, burst_multiplier=2,
                burst_duration_s=60, seed=0) | kwargs
    with pytest.raises(ValueError, match=message):
        diurnal_with_bursts(**args)


def test_sessions_share_prefixes_and_distinct_sessions_do_not():
    demand = rate_curve_arrivals([0.0], [50.0], prompt=LengthDistribution.uniform(1, 40), output=FIXED["output"],
                                 seed=4, duration_s=100, sessions=20, turns_prefix_tokens=100)
    plain = rate_curve_arrivals([0.0], [50.0], prompt=LengthDistribution.uniform(1, 40), output=FIXED["output"],
                                seed=4, duration_s=100)
    blocks = 7   # 100 tokens round up to 7 blocks of 16: 112 shared tokens
    assert demand.prefix_block_tokens == 16 and np.array_equal(demand.prompt, plain.prompt + blocks * 16)
    assert set(demand.session.tolist()) == set(range(20))
    by_session: dict[int, tuple] = {}
    for key, ids in zip(demand.session.tolist(), demand.prefix):
        assert len(ids) == blocks and by_session.setdefault(key, ids) == ids
    users = list(by_session.values())
    assert all(not set(a) & set(b) for i, a in enumerate(users) for b in users[i + 1:])
    # prompt = the blocks' tokens: whole shared blocks, then the request's own tokens (its implicit blocks)
    assert np.all(demand.prompt - len(demand.prefix[0]) * 16 >= 1)
    counts = np.bincount(demand.session, minlength=20)
    assert counts.min() > 0.6 * counts.mean()   # uniform: 250 each, sd 16
    skewed = with_sessions(plain, 20, 0, seed=1, skew=1.2)
    top = np.bincount(skewed.session, minlength=20)
    assert top[0] == top.max() and top[0] > 3 * top[10] and skewed.prefix is None
    with pytest.raises(ValueError, match="already has prefixes"):
        with_sessions(from_rows([0.0], [5], [1], [(1,)]), 3, 16, seed=0)


def test_a_million_request_day_builds_in_seconds():
    t, rate = diurnal_with_bursts(peak_rps=18, trough_rps=4.5, duration_s=86400, bursts_per_day=8,
                                  burst_multiplier=3, burst_duration_s=300, seed=3)
    start = time.perf_counter()
    demand = rate_curve_arrivals(t, rate, prompt=LengthDistribution("lognormal", (1000, 0.8)),
                                 output=LengthDistribution("lognormal", (250, 0.7)), seed=7, sessions=2000,
                                 turns_prefix_tokens=1000)
    elapsed = time.perf_counter() - start
    assert len(demand) > 1_000_000 and elapsed < 10, elapsed   # about 0.4 s on one core of the dev machine
