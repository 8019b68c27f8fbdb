"""`--reasoning-effort-tokens`: each effort's length distribution, the defaults under what is given."""

from __future__ import annotations

import pytest

from contract.reasoning_effort import DEFAULT_EFFORT_TOKENS, parse_effort_tokens


def test_given_efforts_replace_the_defaults_and_the_rest_keep_theirs():
    table = parse_effort_tokens("low=3,high=uniform:100:200")
    assert table["low"].spec == "3" and table["high"].spec == "uniform:100:200"
    assert table["medium"].spec == "1024" and table["minimal"].spec == "64"
    assert set(parse_effort_tokens("")) == {item.split("=")[0] for item in DEFAULT_EFFORT_TOKENS.split(",")}


@pytest.mark.parametrize("text, words", [
    ("extreme=5", "'extreme=5' is not EFFORT=DIST"),
    ("low", "'low' is not EFFORT=DIST"),
    ("none=5", "'none=5' is not EFFORT=DIST"),   # none never reasons
    ("low=lots", "--reasoning-effort-tokens low"),
])
def test_a_bad_map_names_the_part(text, words):
    with pytest.raises(ValueError, match=words):
        parse_effort_tokens(text)
