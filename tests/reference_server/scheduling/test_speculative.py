"""Speculative decoding's pure parts: prompt-lookup proposals and the greedy acceptance rule."""

import pytest

from reference_server.scheduling.speculative import NgramProposer, accept_greedy


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
