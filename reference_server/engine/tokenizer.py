"""Byte-level tokenizer: ids 0..255 are UTF-8 bytes, then a few special ids.

Prompt token counts are exact and nothing is downloaded. `IncrementalDecoder` turns a
stream of ids into text without ever splitting a multi-byte UTF-8 character.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable

SPECIAL_TOKENS = ("<|bos|>", "<|eos|>", "<|pad|>", "<|system|>", "<|user|>", "<|assistant|>",
                  "<|end|>", "<|reserved|>")
NUM_BYTES = 256


class ByteTokenizer:
    """UTF-8 bytes plus `SPECIAL_TOKENS` (ids 256..263): vocab_size 264."""

    def __init__(self) -> None:
        self.special_ids = {name: NUM_BYTES + i for i, name in enumerate(SPECIAL_TOKENS)}
        self.bos_id = self.special_ids["<|bos|>"]
        self.eos_id = self.special_ids["<|eos|>"]
        self.pad_id = self.special_ids["<|pad|>"]
        self.vocab_size = NUM_BYTES + len(SPECIAL_TOKENS)

    def encode(self, text: str, *, add_bos: bool = False) -> list[int]:
        ids = list(text.encode("utf-8"))
        return [self.bos_id, *ids] if add_bos else ids

    def decode(self, ids: Iterable[int]) -> str:
        """Text of the byte ids; special ids are dropped, invalid UTF-8 becomes U+FFFD."""
        return bytes(i for i in ids if 0 <= i < NUM_BYTES).decode("utf-8", errors="replace")

    def is_special(self, token_id: int) -> bool:
        return token_id >= NUM_BYTES

    def text_ids(self) -> list[int]:
        """The ids that are a printable character on their own (ASCII ' ' to '~', and the newline): a
        stream of them is text token by token, as a real model's word pieces mostly are. A byte of a
        multi-byte character or a special id is not: its text is held back or empty."""
        return [ord("\n"), *range(0x20, 0x7F)]


class IncrementalDecoder:
    """Streaming decode: `feed(ids)` returns only complete characters, holding back a partial one."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, ids: Iterable[int]) -> str:
        return self._decoder.decode(bytes(i for i in ids if 0 <= i < NUM_BYTES))

    def flush(self) -> str:
        """Whatever is still held back (an incomplete character becomes U+FFFD)."""
        return self._decoder.decode(b"", final=True)
