"""Length distributions drawn many at once (the simulator's way) and built without a spec."""

import random

import numpy as np
import pytest

from contract.distributions import LengthDistribution, parse_length_distribution


@pytest.mark.parametrize("spec", ["128", "uniform:64:72", "normal:256:32", "lognormal:200:0.5", "normal:2:50"])
def test_an_array_draw_has_the_distribution_of_single_draws(spec):
    n = 40000
    dist = parse_length_distribution(spec)
    many = dist.sample_array(np.random.default_rng(1), n)
    rng = random.Random(1)
    one_by_one = np.array([dist.sample(rng) for _ in range(n)])
    assert many.dtype == np.int64 and many.min() >= 1     # clamped, as one draw is
    assert abs(many.mean() - one_by_one.mean()) <= 4 * np.hypot(many.std(), one_by_one.std()) / np.sqrt(n)
    assert many.std() == pytest.approx(one_by_one.std(), rel=0.05, abs=0.01)
    if dist.kind in ("fixed", "uniform"):
        assert set(many.tolist()) == set(one_by_one.tolist())


def test_values_are_drawn_with_replacement_and_the_same_seed_draws_the_same():
    dist = LengthDistribution.from_values([5, 50, 500])
    draws = dist.sample_array(np.random.default_rng(4), 3000)
    assert set(draws) == {5, 50, 500}
    assert np.array_equal(draws, dist.sample_array(np.random.default_rng(4), 3000))


def test_built_directly_it_reads_as_its_spec():
    assert LengthDistribution.fixed(128) == parse_length_distribution("128")
    assert LengthDistribution.uniform(64, 256) == parse_length_distribution("uniform:64:256")


@pytest.mark.parametrize("call, message", [
    (lambda: LengthDistribution.fixed(0), "length must be a positive integer, got 0"),
    (lambda: LengthDistribution.uniform(0, 5), "length low must be a positive integer, got 0"),
    (lambda: LengthDistribution.uniform(10, 5), r"length high \(5\) must be >= low \(10\)"),
    (lambda: LengthDistribution("normal", (0.5, 1.0)), "normal mean must be >= 1"),
    (lambda: LengthDistribution("lognormal", (100.0, -1.0)), "lognormal spread must be >= 0"),
    (lambda: LengthDistribution("uniform", (5,)), "takes 2 parameters"),
    (lambda: LengthDistribution.from_values(()), "positive integers"),
])
def test_built_directly_it_is_checked(call, message):
    with pytest.raises(ValueError, match=message):
        call()
