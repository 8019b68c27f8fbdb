"""Paired statistics on synthetic data: slow drift plus fast noise, known effects."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reports.gate.stats import compare_blocked, time_blocks
from reports.paired.power import pairs_needed, plan, sigma_upper
from reports.paired.stats import (
    BETTER, SAME, UNKNOWN, WORSE, judge, log_ratios, paired_bootstrap_ratio,
)
from reports.paired.sequential import look_alpha, look_alphas, pocock_spent


def drifting_machine(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Machine speed factor per second: a slow random walk (up to ~+40%) times fast noise."""
    walk = np.cumsum(rng.normal(0, 0.03, int(seconds)))
    return np.exp(walk - walk.min()) * np.exp(rng.normal(0, 0.05, int(seconds)))


def interleaved(effect: float, pairs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-pair p50 TPOT of arms A and B, slices of 2 s in a random order per pair."""
    rng = np.random.default_rng(seed)
    speed = drifting_machine(pairs * 4 + 4, rng)
    a, b = np.empty(pairs), np.empty(pairs)
    for i in range(pairs):
        first, second = speed[4 * i:4 * i + 2].mean(), speed[4 * i + 2:4 * i + 4].mean()
        if rng.random() < 0.5:
            a[i], b[i] = 2e-3 * first, 2e-3 * (1 + effect) * second
        else:
            b[i], a[i] = 2e-3 * (1 + effect) * first, 2e-3 * second
    return a, b


def test_a_over_a_under_drift_is_same_for_pairing_but_a_two_run_gate_sees_the_drift():
    rng = np.random.default_rng(3)
    # two-run design: A for 2 minutes, then B (identical code) for 2 minutes on a drifting machine
    speed = drifting_machine(240, rng)
    per_request_a = np.repeat(speed[:120], 50) * 2e-3 * rng.lognormal(0, 0.05, 6000)
    per_request_b = np.repeat(speed[120:], 50) * 2e-3 * rng.lognormal(0, 0.05, 6000)
    blocks = time_blocks(np.arange(6000))
    two_run = compare_blocked(per_request_a, blocks, per_request_b, blocks, "p50")
    assert abs(two_run.ratio - 1) > 0.05          # the drift alone looks like a change
    assert two_run.significant(two_run.ratio > 1)
    a, b = interleaved(0.0, 60, seed=3)
    result = judge("tpot_s.p50", a, b, threshold=0.05, higher_is_worse=True)
    assert result.verdict == SAME
    assert result.ci[0] > 0.95 and result.ci[1] < 1.05


@pytest.mark.parametrize("seed", range(5))
def test_a_ten_percent_slowdown_is_worse_and_a_speedup_better(seed):
    a, b = interleaved(0.10, 40, seed)
    worse = judge("tpot_s.p50", a, b, threshold=0.05, higher_is_worse=True)
    assert worse.verdict == WORSE and worse.p_value < 0.05
    assert worse.ci[0] < 1.10 < worse.ci[1] and worse.worse_by == pytest.approx(worse.ratio - 1)
    better = judge("tpot_s.p50", b, a, threshold=0.05, higher_is_worse=True)
    assert better.verdict == BETTER
    # for a throughput metric, B lower is worse
    assert judge("output_tokens_per_s", b, a, threshold=0.05, higher_is_worse=False).verdict == WORSE


def test_too_few_pairs_or_a_change_near_the_threshold_is_unknown():
    a, b = interleaved(0.10, 4, seed=1)
    assert judge("e2e_s.p50", a, b, threshold=0.05, higher_is_worse=True).verdict == UNKNOWN
    a, b = interleaved(0.05, 12, seed=1)   # right at the threshold, with few pairs: cannot tell
    assert judge("e2e_s.p50", a, b, threshold=0.05, higher_is_worse=True).verdict == UNKNOWN


def test_log_ratios_drop_pairs_without_a_value_and_refuse_ragged_arms():
    assert log_ratios([1.0, np.nan, 2.0, 0.0], [2.0, 1.0, 2.0, 1.0]) == pytest.approx([math.log(2), 0.0])
    with pytest.raises(ValueError, match="pair counts"):
        log_ratios([1.0], [1.0, 2.0])


def test_the_first_look_spends_exactly_its_share_and_a_single_look_all_of_alpha():
    assert pocock_spent(0.05, 1.0) == pytest.approx(0.05)
    assert look_alpha(0.05, [30], 30) == pytest.approx(0.05)
    assert look_alphas(0.05, [15, 30], 30)[0] == pytest.approx(pocock_spent(0.05, 0.5))
    with pytest.raises(ValueError, match="increasing"):
        look_alphas(0.05, [20, 20], 30)


def test_correlated_boundaries_match_the_published_pocock_type_values():
    # Lan-DeMets Pocock-type spending, alpha 0.05 two-sided, 5 equal looks: boundaries z of about
    # 2.44, 2.43, 2.41, 2.40, 2.39 (Jennison & Turnbull, Group Sequential Methods, table 7.6),
    # nominal alphas 0.0148 .. 0.0168; Bonferroni on the increments would give 0.0100 at look 5.
    from scipy.stats import norm
    nominal = [2 * norm.sf(z) for z in (2.438, 2.427, 2.410, 2.397, 2.389)]
    assert look_alphas(0.05, [8, 16, 24, 32, 40], 40) == pytest.approx(nominal, rel=0.06)
    last_share = pocock_spent(0.05, 1.0) - pocock_spent(0.05, 0.8)
    assert look_alpha(0.05, [8, 16, 24, 32, 40], 40) > 1.5 * last_share


def test_repeated_looks_keep_the_a_over_a_false_alarm_rate_at_alpha():
    # nested looks on the same pairs at their nominal alphas: over all looks about alpha, neither
    # above (the boundary's promise) nor far below (the power Bonferroni shares threw away)
    rng = np.random.default_rng(11)
    looks = [10, 20, 30, 40]
    alphas = look_alphas(0.05, looks, 40)
    alarms, trials = 0, 600
    for trial in range(trials):
        r = rng.normal(0, 0.08, 40)
        a, b = np.ones(40), np.exp(r)
        alarms += any(judge("m", a[:now], b[:now], threshold=0.001, higher_is_worse=True, alpha=alpha).verdict
                      in (WORSE, BETTER) for now, alpha in zip(looks, alphas))
    assert 0.025 < alarms / trials < 0.075   # nominal 0.05; the binomial spread of 600 trials is about 0.009


def test_power_formula_and_plan_follow_the_noisiest_metric():
    # sigma 9.4% per pair, 10% effect, alpha 5%, power 90%: ((1.96 + 1.28) x 0.094 / log 1.1)^2 / (3/pi)
    assert pairs_needed(0.094, 0.10) == math.ceil(((1.959964 + 1.281552) * 0.094 / math.log(1.1)) ** 2 / (3 / math.pi))
    assert sigma_upper(0.1, 5) > 0.1 and sigma_upper(0.1, 1000) == pytest.approx(0.1, rel=0.05)
    rng = np.random.default_rng(0)
    pilot = {"ttft_s.p50": rng.normal(0, 0.02, 6), "tpot_s.p50": rng.normal(0, 0.15, 6)}
    result = plan(pilot, min_effect=0.10, seconds_per_pair=5.0)
    assert result.metric == "tpot_s.p50" and result.pairs >= 6 and result.seconds == result.pairs * 5.0
    with pytest.raises(ValueError, match="fewer than 2"):
        plan({"x": np.array([0.1])}, min_effect=0.1, seconds_per_pair=1)


def test_a_quiet_pilot_never_plans_fewer_pairs_than_the_test_judges():
    # a 1% spread needs ~2 pairs by the formula, but fewer than MIN_PAIRS is always UNKNOWN: the plan says MIN_PAIRS
    from reports.paired.stats import MIN_PAIRS
    quiet = {"tpot_s.p50": np.random.default_rng(1).normal(0, 0.01, 3)}
    assert pairs_needed(0.01, 0.10) < MIN_PAIRS
    assert plan(quiet, min_effect=0.10, seconds_per_pair=2.0, min_pairs=3).pairs == MIN_PAIRS


def test_paired_bootstrap_of_a_whole_arm_p99_covers_the_true_ratio():
    rng = np.random.default_rng(5)
    a = [rng.lognormal(0, 0.3, 80) for _ in range(30)]
    b = [values * 1.2 for values in (rng.lognormal(0, 0.3, 80) for _ in range(30))]
    ratio, (lo, hi) = paired_bootstrap_ratio(a, b, lambda v: np.percentile(v, 99), seed=1)
    assert lo < 1.2 < hi and lo > 1.0
    assert paired_bootstrap_ratio([np.array([])], [np.array([1.0])], np.median) is None


def test_the_signed_rank_distribution_and_the_hodges_lehmann_interval():
    from reports.paired.stats import estimate_ci, hodges_lehmann, signed_rank_cdf

    # n = 5: 32 subsets of 1..5; sums 0..15 occur 1,1,1,2,2,3,3,3,3,3,3,2,2,1,1,1 times
    assert (np.diff(np.concatenate([[0], signed_rank_cdf(5)])) * 32).round().tolist() == \
        [1, 1, 1, 2, 2, 3, 3, 3, 3, 3, 3, 2, 2, 1, 1, 1]
    assert hodges_lehmann(np.array([0.0, 1.0, 2.0, 10.0])) == pytest.approx(1.75)   # median of 10 Walsh averages
    rng = np.random.default_rng(2)
    covered = sum(lo <= 0.1 <= hi for lo, hi in (estimate_ci(rng.standard_t(3, 20) * 0.05 + 0.1, 0.9)
                                                   for _ in range(1000)))
    assert 0.87 <= covered / 1000 <= 0.95   # distribution-free: holds for heavy tails too


def test_one_disturbed_pair_does_not_move_the_verdict():
    a, b = interleaved(0.0, 30, seed=4)
    quiet = judge("tpot_s.p50", a, b, threshold=0.05, higher_is_worse=True)
    b = b.copy()
    b[7] *= 3.0          # a burst of contention during one of B's slices
    disturbed = judge("tpot_s.p50", a, b, threshold=0.05, higher_is_worse=True)
    assert quiet.verdict == disturbed.verdict == SAME
    assert disturbed.log_sd > 2 * quiet.log_sd and disturbed.log_sd_robust < 1.5 * quiet.log_sd_robust
