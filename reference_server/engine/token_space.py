"""Which token ids a model's prompts and outputs live in: the byte tokenizer's, or a checkpoint's own.

Presets (random weights made for the byte tokenizer) and servecap's own checkpoints use the
byte tokenizer's ids: prompts may use ids < 264 and sampling is restricted to them, so every
output decodes. A Hugging Face checkpoint that ships its own tokenizer (`tokenizer.json` or
`tokenizer_config.json` beside `config.json`) keeps its own ids, as any engine serving it would:
prompts may use its whole vocabulary, greedy decoding takes the argmax over all of it, and its
`eos_token_id` (config.json) ends a sequence. The byte tokenizer still renders text, so such a
model's text is only meaningful for ids < 256; send token-id prompts and read `token_ids`
(`return_token_ids`) to compare it with another engine. Pure: json only (the serving process reads it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from reference_server.engine.tokenizer import ByteTokenizer

OWN_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


@dataclass(frozen=True)
class TokenSpace:
    vocab_size: int         # ids a prompt may use; the sampler chooses among ids < vocab_size
    eos_id: int | None      # the id that ends a sequence (unless ignore_eos), None if the model names none
    source: str             # "byte tokenizer" | "checkpoint"

    def describe(self) -> dict:
        return {"vocab_size": self.vocab_size, "eos_id": self.eos_id, "source": self.source}


def token_space(model: str, tokenizer: ByteTokenizer) -> TokenSpace:
    byte = TokenSpace(tokenizer.vocab_size, tokenizer.eos_id, "byte tokenizer")
    directory = Path(model)
    if not (directory / "config.json").is_file() or not any((directory / f).is_file() for f in OWN_TOKENIZER_FILES):
        return byte
    try:
        config = json.loads((directory / "config.json").read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return byte   # the checkpoint loader says what is wrong with it
    vocab = config.get("vocab_size")
    if isinstance(vocab, bool) or not isinstance(vocab, int) or vocab <= 0:
        return byte
    eos = config.get("eos_token_id")
    eos = eos[0] if isinstance(eos, list) and eos else eos
    return TokenSpace(vocab, eos if isinstance(eos, int) and not isinstance(eos, bool) else None, "checkpoint")
