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

from contract.prompt_text import ascii_text


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

