"""Prompts of an asked token length, built without any tokenizer.

The reference server's tokenizer is byte-level (one token per UTF-8 byte), so a prompt
of N tokens is N ASCII bytes. Other servers tokenize differently: for them the record
keeps both the asked length (`prompt_tokens_asked`) and the server's `usage.prompt_tokens`.

Text is lowercase pseudo-words from a seeded `random.Random`, so prompts differ from
request to request (no accidental prefix-cache hits) yet are reproducible. The shared
prefix (`--shared-prefix-tokens`) is one fixed text drawn from the run seed, sent as the
system message (chat) or the start of the prompt (completions), on top of the sampled
prompt length (as vLLM's benchmark's `prefix_len`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

_LETTERS = "etaoinshrdlucmfwypvbgkqjxz"
_WEIGHTS = [13, 9, 8, 8, 7, 7, 6, 6, 6, 4, 3, 3, 3, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1]


def ascii_text(n_bytes: int, rng: random.Random) -> str:
    """Exactly n_bytes of ASCII: words of 2-9 letters separated by single spaces."""
    if n_bytes < 0:
        raise ValueError(f"n_bytes must be >= 0, got {n_bytes}")
    parts: list[str] = []
    size = 0
    while size < n_bytes:
        word_len = rng.randint(2, 9)
        word = "".join(rng.choices(_LETTERS, _WEIGHTS, k=word_len))
        parts.append(word)
        size += word_len + 1
    return " ".join(parts)[:n_bytes].rstrip(" ").ljust(n_bytes, "a")


@dataclass(frozen=True)
class Prompt:
    system: str | None  # shared prefix, None when there is none
    user: str           # the request's own text

    @property
    def completion_text(self) -> str:
        """The prompt as one string for /v1/completions."""
        return (self.system or "") + self.user


class PromptBuilder:
    """Builds request prompts: a run-wide shared prefix plus per-request text."""

    def __init__(self, shared_prefix_tokens: int = 0, seed: int = 0) -> None:
        if shared_prefix_tokens < 0:
            raise ValueError(f"shared_prefix_tokens must be >= 0, got {shared_prefix_tokens}")
        self.shared_prefix = ascii_text(shared_prefix_tokens, random.Random(f"prefix/{seed}")) or None

    def build(self, prompt_tokens: int, rng: random.Random) -> Prompt:
        if prompt_tokens < 1:
            raise ValueError(f"prompt_tokens must be >= 1, got {prompt_tokens}")
        return Prompt(self.shared_prefix, ascii_text(prompt_tokens, rng))


def request_rng(seed: int, level: str | None, stream: object, index: object) -> random.Random:
    """Request `index` of a stream (a process's closed loop, or an open loop's schedule): its own lengths
    and text. The level id is part of the seed: a sweep's levels run one after another against one server,
    whose prefix cache would otherwise serve each level's prompts from the blocks a previous level left,
    and the run would measure cache hits instead of prefill (and a simulator that assumes distinct
    prompts would not match it)."""
    return random.Random(f"{seed}/{level or ''}/{stream}/{index}")

