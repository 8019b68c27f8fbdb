"""The load generator's synthetic prompt text: what a server, and a router that reads the text, are sent.

    ascii_text(n, rng)                      n bytes of lowercase pseudo-words (one token a byte on a byte tokenizer)
    trace_block_text(seed, hash_id, n)      a trace's shared block: the same text wherever the id recurs
    trace_tail_text(seed, index, n)         row `index`'s own text after its blocks

A trace replay (loadgen.workload.traces.TracePrompts) writes row i as its blocks' texts, then its own tail.
The plan (calculators.plan) reads the same rule for what vllm-router's `cache_aware` tree is given: the
router matches characters, and where a prompt's own text starts decides which earlier request's replica
it is matched to (calculators.plan.cache_aware_router). Words are drawn with English letter frequencies,
so two prompts' own texts often share their first letters, as real users' messages do.
"""

from __future__ import annotations

import random

LETTERS = "etaoinshrdlucmfwypvbgkqjxz"
WEIGHTS = (13, 9, 8, 8, 7, 7, 6, 6, 6, 4, 3, 3, 3, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1)


def ascii_text(n_bytes: int, rng: random.Random) -> str:
    """Exactly n_bytes of ASCII: words of 2-9 letters separated by single spaces."""
    if n_bytes < 0:
        raise ValueError(f"n_bytes must be >= 0, got {n_bytes}")
    parts: list[str] = []
    size = 0
    while size < n_bytes:
        word_len = rng.randint(2, 9)
        word = "".join(rng.choices(LETTERS, WEIGHTS, k=word_len))
        parts.append(word)
        size += word_len + 1
    return " ".join(parts)[:n_bytes].rstrip(" ").ljust(n_bytes, "a")


def trace_block_text(seed: int, hash_id: int, n_bytes: int) -> str:
    return ascii_text(n_bytes, random.Random(f"block/{seed}/{hash_id}"))


def trace_tail_text(seed: int, index: int, n_bytes: int) -> str:
    """Row `index`'s own text (a row without blocks is all tail)."""
    return ascii_text(n_bytes, random.Random(f"trace/{seed}/{index}"))
