"""OpenAI's `reasoning_effort` as reasoning tokens: EFFORT=DIST,... (`--reasoning-effort-tokens`).

An effort names no length by itself: each model spends its own on "high". The default gives each
effort four times the last (``DEFAULT_EFFORT_TOKENS``), a shape to replace with the lengths measured
from the model being planned for. Pure.
"""

from __future__ import annotations

from contract.distributions import LengthDistribution, parse_length_distribution

EFFORTS = ("none", "minimal", "low", "medium", "high")
DEFAULT_EFFORT_TOKENS = "minimal=64,low=256,medium=1024,high=4096"   # "none" never reasons


def parse_effort_tokens(text: str) -> dict[str, LengthDistribution]:
    """`--reasoning-effort-tokens EFFORT=DIST,...` -> {effort: its length distribution}; ValueError naming the
    bad part. Efforts left out keep the default's; "none" is always 0 tokens."""
    table = {}
    for spec in (DEFAULT_EFFORT_TOKENS, text):
        for item in filter(None, (part.strip() for part in spec.split(","))):
            effort, sep, dist = item.partition("=")
            if not sep or effort not in EFFORTS[1:]:
                raise ValueError(f"--reasoning-effort-tokens: {item!r} is not EFFORT=DIST with EFFORT one of "
                                 f"{', '.join(EFFORTS[1:])}")
            table[effort] = parse_length_distribution(dist, f"--reasoning-effort-tokens {effort}")
    return table
