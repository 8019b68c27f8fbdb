"""Speculative decoding's pure parts: prompt-lookup proposals and the greedy acceptance rule."""

import pytest

from engine_core.scheduling.speculative import (
    AcceptanceDraws, DraftSlots, NgramProposer, accept_greedy, per_position_acceptance)


def test_prompt_lookup_proposes_what_followed_the_latest_earlier_match_of_the_longest_suffix():
    proposer = NgramProposer(3, max_n=3, min_n=1)
    #           0  1  2  3  4  5  6  7  8  9
    tokens = [5, 6, 7, 8, 1, 6, 7, 9, 2, 6, 7]
    assert proposer.propose(tokens) == [9, 2, 6]        # "6 7" last seen at 5-6, then 9 2 6 (latest, not 1-2)
    assert proposer.propose(tokens, limit=1) == [9]
    assert proposer.propose([1, 2, 3]) == []            # no earlier occurrence of any suffix
    assert proposer.propose([4, 4]) == [4]              # a run repeats itself
    assert proposer.propose([9, 1, 2, 3, 1, 2]) == [3, 1, 2]   # the continuation may run into the suffix
    assert NgramProposer(2, max_n=2, min_n=2).propose([1, 2, 5, 2]) == []   # only 2-grams: "5 2" never seen


def test_acceptance_keeps_the_agreeing_prefix_and_the_targets_own_next_token():
    assert accept_greedy([4, 5, 6], [4, 5, 6, 7]) == [4, 5, 6, 7]   # all kept, plus the bonus token
    assert accept_greedy([4, 5, 6], [4, 9, 6, 7]) == [4, 9]         # the first disagreement ends it
    assert accept_greedy([4, 5, 6], [3, 5, 6, 7]) == [3]            # none kept: one token, as without
    assert accept_greedy([], [8]) == [8]
    with pytest.raises(ValueError, match="target needs 3 tokens"):
        accept_greedy([1, 2], [1, 2])


@pytest.mark.parametrize("kwargs, says", [({"num_tokens": 0}, "num_tokens"), ({"num_tokens": 2, "max_n": 0}, "max_n"),
                                          ({"num_tokens": 2, "max_n": 2, "min_n": 3}, "must not exceed")])
def test_bad_proposer_settings_name_the_field(kwargs, says):
    with pytest.raises(ValueError, match=says):
        NgramProposer(**kwargs)


def test_a_draft_gets_k_places_or_what_max_tokens_leaves():
    assert DraftSlots(3).propose([5, 6, 7]) == [7, 7, 7]
    assert DraftSlots(3).propose([5, 6, 7], limit=1) == [7]
    assert DraftSlots(3).propose([5], limit=0) == []
    with pytest.raises(ValueError, match="positive integer"):
        DraftSlots(0)


def test_one_rate_is_a_power_per_position_and_a_list_is_taken_as_vllm_reports_it():
    assert per_position_acceptance((0.5,), 3) == pytest.approx((0.5, 0.25, 0.125))
    assert per_position_acceptance((0.9, 0.6, 0.6), 3) == (0.9, 0.6, 0.6)
    for rates, says in (((0.5, 0.6, 0.1), "cannot rise"), ((0.5, 0.4), "one per position"),
                        ((1.2,), r"\[0, 1\]")):
        with pytest.raises(ValueError, match=says):
            per_position_acceptance(rates, 3)


def test_seeded_draws_keep_each_position_at_its_rate_and_never_one_after_a_rejection():
    rates = (0.8, 0.5, 0.5, 0.1)
    draws = AcceptanceDraws(rates, seed=3)
    kept = [draws.accepted(4) for _ in range(20_000)]
    for position, rate in enumerate(rates, start=1):
        assert sum(k >= position for k in kept) / len(kept) == pytest.approx(rate, abs=0.015)
    again = AcceptanceDraws(rates, seed=3)
    assert [again.accepted(4) for _ in range(5)] == kept[:5]   # seeded
    fewer = AcceptanceDraws(rates, seed=3)
    assert max(fewer.accepted(2) for _ in range(1000)) == 2    # at most the proposals there are
