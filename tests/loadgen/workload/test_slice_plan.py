"""The slice plan: a random order per pair, the same request sequence within a pair."""

from __future__ import annotations

from collections import Counter

import pytest

from loadgen.workload.slice_plan import ArmRoute, SlicePlan, pair_order, pair_slices, slice_length, warmup_slices


def test_pairs_alternate_arms_in_a_seeded_random_order():
    slices = pair_slices(0, 200, first_index=2, duration_s=2.0, run_seed=7)
    assert [s.index for s in slices] == list(range(2, 402))
    orders = Counter()
    for first, second in zip(slices[::2], slices[1::2]):
        assert first.pair == second.pair and {first.arm, second.arm} == {"a", "b"}
        assert first.seed == second.seed                     # the same request sequence in both arms
        orders[first.arm + second.arm] += 1
    assert 70 < orders["ab"] < 130 and orders["ab"] + orders["ba"] == 200   # both orders, about half each
    assert pair_slices(0, 200, 2, 2.0, 7) == slices                          # reproducible from the seed
    assert [s.arm for s in pair_slices(0, 200, 2, 2.0, 8)] != [s.arm for s in slices]
    assert len({s.seed for s in slices}) == 200                              # each pair its own sequence


def test_a_later_batch_continues_the_numbering_and_the_same_pair_draws():
    first = pair_slices(0, 5, first_index=2, duration_s=2.0, run_seed=1)
    more = pair_slices(5, 3, first_index=12, duration_s=2.0, run_seed=1)
    whole = pair_slices(0, 8, first_index=2, duration_s=2.0, run_seed=1)
    assert first + more == whole
    assert pair_order(1, 5) == (more[0].arm, more[1].arm)


def test_warmup_is_one_slice_per_arm_and_slices_are_at_least_two_seconds():
    warm = warmup_slices(0, 3.0, run_seed=1)
    assert [(s.arm, s.phase, s.pair) for s in warm] == [("a", "warmup", None), ("b", "warmup", None)]
    assert slice_length(0.05) == 2.0 and slice_length(1.0) == 5.0 and slice_length(None) == 2.0
    with pytest.raises(ValueError, match="positive"):
        pair_slices(0, 1, 0, 0.0, 1)


def test_a_duet_groups_each_pair_and_the_warm_up_an_interleaved_plan_runs_one_slice_at_a_time():
    slices = tuple(warmup_slices(0, 1.0, run_seed=2) + pair_slices(0, 3, 2, 1.0, run_seed=2))
    arms = {"a": ArmRoute("http://127.0.0.1:1", "m"), "b": ArmRoute("http://127.0.0.1:2", "m")}
    duet = SlicePlan(arms=arms, slices=slices, schedule="duet")
    groups = duet.groups()
    assert [[s.pair for s in g] for g in groups] == [[None, None], [0, 0], [1, 1], [2, 2]]
    assert all({s.arm for s in g} == {"a", "b"} for g in groups)
    assert SlicePlan.from_json(duet.to_json()) == duet
    interleaved = SlicePlan(arms=arms, slices=slices)
    assert interleaved.groups() == [(s,) for s in slices] and interleaved.schedule == "interleaved"
    with pytest.raises(ValueError, match="schedule"):
        SlicePlan(arms=arms, slices=slices, schedule="round-robin")
