"""The front end's delay against the load: both shapes recover what made the data, and the choice
between them goes to the one that predicts a left-out level."""

import numpy as np
import pytest

from calculators.sim.front_end import FrontEnd, FrontEndByLoad
from calculators.sim.front_end_curves import POWER, QUEUE, choose, fit_power, held_out_errors, power_mean

USERS = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
# tokens/s of a closed loop whose engine saturates (vLLM's CPU build, stop 25: 224 ... 3523)
SATURATING_TOKENS = np.array([224.0, 493.0, 934.0, 1617.0, 2502.0, 3523.0])


def level(in_s: float, n: int = 20) -> FrontEnd:
    spread = np.linspace(0.5, 1.5, n)
    return FrontEnd(tuple(in_s * spread), (0.0,) * n, (0.002,) * n)


def means_of(in_s) -> dict:
    return {"in_s": np.asarray(in_s, dtype=float), "first_out_s": np.zeros(len(in_s)),
            "last_out_s": np.full(len(in_s), 0.002)}


def test_the_power_curve_recovers_its_parameters_and_a_two_level_delay_gets_a_line():
    truth = 0.010 + 0.002 * USERS ** 1.3
    curve = fit_power(USERS, means_of(truth))
    assert curve["in_s"]["d0_s"] == pytest.approx(0.010, rel=0.02)
    assert curve["in_s"]["k_s"] == pytest.approx(0.002, rel=0.02)
    assert curve["in_s"]["exponent"] == pytest.approx(1.3, rel=0.01)
    assert curve["first_out_s"] == {"d0_s": 0.0, "k_s": 0.0, "exponent": 1.0}   # 0 everywhere: stays 0
    two = means_of(truth)
    two["last_out_s"] = np.array([0.0, 0.0, 0.0, 0.0, 0.003, 0.005])            # floored to 0 at four levels
    line = fit_power(USERS, two)["last_out_s"]
    assert line["exponent"] == 1.0
    assert power_mean({"d": line}, "d", 16.0) == pytest.approx(0.003, rel=0.01)
    assert power_mean({"d": line}, "d", 32.0) == pytest.approx(0.005, rel=0.01)
    assert fit_power(USERS[:2], means_of(truth[:2])) is None                    # two levels: nothing to fit


def test_a_delay_that_grows_with_the_users_while_throughput_saturates_is_fitted_as_a_power_of_the_load():
    # a front end that handles every stream in turn: 12 ms + 3 ms per user, whatever the engine's output
    truth = 0.012 + 0.003 * USERS
    shape, curve = choose(USERS, SATURATING_TOKENS, means_of(truth))
    assert shape == POWER and curve["in_s"]["exponent"] == pytest.approx(1.0, abs=0.05)
    # leave c=8 out: the table built on the other five levels predicts it within 3%
    keep = USERS != 8
    table = FrontEndByLoad(tuple(USERS[keep]), tuple(level(v) for v in truth[keep]), tuple(SATURATING_TOKENS[keep]))
    assert table.shape == POWER
    assert np.mean(table.at(8, 1617.0).in_s) == pytest.approx(truth[USERS == 8][0], rel=0.03)
    # why it won: left out in turn, each level is predicted exactly by the power curve, and
    # by the queue (whose capacity must sit just above the top throughput) with 1.5% of error
    errors = held_out_errors(USERS, SATURATING_TOKENS, means_of(truth))
    assert errors[POWER] < 1e-4 and errors[QUEUE] > 0.01


def test_a_delay_that_climbs_as_the_chunk_rate_nears_capacity_keeps_the_queue_shape():
    capacity, d0, k = 1000.0, 0.001, 0.0005
    tokens = np.array([100.0, 300.0, 600.0, 850.0, 930.0])
    shape, curve = choose(USERS[:5], tokens, means_of(d0 + k * tokens / (capacity - tokens)))
    assert shape == QUEUE and curve["capacity_tokens_per_s"] == pytest.approx(capacity, rel=0.05)


def test_without_throughputs_or_with_three_levels_the_choice_needs_no_cross_validation():
    truth = 0.012 + 0.003 * USERS[:3]
    assert choose(USERS[:3], (), means_of(truth))[0] == POWER           # no tokens/s: the queue cannot be fitted
    assert choose(USERS[:3], SATURATING_TOKENS[:3], means_of(truth))[0] == QUEUE   # three levels: the queue, as before
    assert choose(USERS[:2], SATURATING_TOKENS[:2], means_of(truth[:2])) == (None, None)
