"""Generated ids -> the text a client sees: special tokens, the stop token, stop strings.

The rules are vLLM's, so a client reads the same text from either server:
- `skip_special_tokens` (default true): special ids (`<|eos|>`, `<|end|>`, ...) add no text;
  false writes each as its name. Ids the byte tokenizer does not have (a checkpoint's own
  vocabulary beyond it) add no text either way: there is no text to give them.
- The id that ended the sequence (end-of-sequence, or one of `stop_token_ids`) adds no text
  unless `keep_stop`; it stays in the generated ids (`token_ids`, `usage`) either way.
- A stop string ends the text before it, or just after it with `keep_stop` (`stop_strings.py`).
`keep_stop` is vLLM's `include_stop_str_in_output` or SGLang's `no_stop_trim`: both ask to keep
whatever ended generation. UTF-8 is decoded incrementally, never splitting a character; a
special token written in the middle of a partial character ends it as U+FFFD.
"""

from __future__ import annotations

from collections.abc import Sequence

from reference_server.api.stop_strings import StopStringMatcher
from reference_server.engine.tokenizer import NUM_BYTES, SPECIAL_TOKENS, IncrementalDecoder


class OutputText:
    """Feed each step's new ids; get back the text to send. `stopped`: a stop string matched."""

    def __init__(self, stop: tuple[str, ...] = (), *, skip_special_tokens: bool = True,
                 keep_stop: bool = False) -> None:
        self.skip_special_tokens = skip_special_tokens
        self.keep_stop = keep_stop
        self._decoder = IncrementalDecoder()
        self._matcher = StopStringMatcher(stop, keep=keep_stop)
        self.ids_used = 0   # of the last `feed`'s ids, those the output keeps

    @property
    def stopped(self) -> bool:
        return self._matcher.stopped

    def feed(self, ids: Sequence[int], *, ends_on_stop_token: bool = False) -> str:
        """Text for `ids`; `ends_on_stop_token`: the last id is the one that ended the sequence.
        `ids_used` then says how many of `ids` the output keeps: all, unless a stop string ended
        among them (several ids at once: a verification, `--stream-interval`), where generation
        ends at the id that completed it, as vLLM ends it, and the ids after it were never output."""
        self.ids_used = len(ids)
        if ends_on_stop_token and ids and not self.keep_stop:
            ids = ids[:-1]
        if len(ids) <= 1 or not self._matcher.stop:
            return self._matcher.feed(self._decode(ids))
        parts = []
        for k, token_id in enumerate(ids):   # one id at a time: which one completes a stop string
            parts.append(self._matcher.feed(self._decode((token_id,))))
            if self._matcher.stopped:
                self.ids_used = k + 1
                break
        return "".join(parts)

    def finish(self) -> str:
        """At the end of generation: a trailing partial character (as U+FFFD) and held-back text."""
        return self._matcher.feed(self._decoder.flush()) + self._matcher.flush()

    def _decode(self, ids: Sequence[int]) -> str:
        if self.skip_special_tokens:
            return self._decoder.feed(ids)
        parts, run = [], []
        for token_id in ids:
            if NUM_BYTES <= token_id < NUM_BYTES + len(SPECIAL_TOKENS):
                parts += [self._decoder.feed(run), self._decoder.flush(), SPECIAL_TOKENS[token_id - NUM_BYTES]]
                run = []
            else:
                run.append(token_id)
        parts.append(self._decoder.feed(run))
        return "".join(parts)
