"""Stop strings for streamed text: end the text at the first stop string, never sending past it.

A stop string may arrive split over several tokens ("\\n\\n" as "\\n" + "\\n"). By default
the stop string itself is not returned (OpenAI's rule), so the tail of the text that is a
prefix of some stop string is held back until it either completes a stop string
(generation ends there) or stops matching (it is released). With `keep` (vLLM's
`include_stop_str_in_output`, SGLang's `no_stop_trim`) the text ends just after the stop
string: nothing needs holding back, the matcher only remembers the tail it already sent so a
stop string split across pieces is still seen, and the stop string that ends first wins, as
when text arrives one character at a time.
"""

from __future__ import annotations


class StopStringMatcher:
    """Feed decoded text pieces; get back the text that is safe to send."""

    def __init__(self, stop: tuple[str, ...] = (), *, keep: bool = False) -> None:
        if any(not s for s in stop):
            raise ValueError("stop strings must be non-empty")
        self.stop = tuple(stop)
        self.keep = keep
        self._held = ""        # not sent yet: may start a stop string (trimming mode)
        self._sent_tail = ""   # sent already: may start a stop string (keeping mode)
        self._tail_chars = max((len(s) for s in self.stop), default=1) - 1
        self.stopped = False

    def feed(self, text: str) -> str:
        """Safe text from `text`; after a match `stopped` is True and later calls return ''."""
        if self.stopped:
            return ""
        if not self.stop:
            return text
        if self.keep:
            return self._feed_keeping(text)
        pending = self._held + text
        first = min(((pending.find(s), s) for s in self.stop if s in pending), default=None)
        if first is not None:
            self.stopped = True
            self._held = ""
            return pending[: first[0]]
        keep = self._longest_partial_match(pending)
        self._held = pending[len(pending) - keep:] if keep else ""
        return pending[: len(pending) - keep]

    def flush(self) -> str:
        """At the end of generation: release whatever was held back."""
        held, self._held = self._held, ""
        return "" if self.stopped else held

    def _feed_keeping(self, text: str) -> str:
        # A match lying wholly in the sent tail was found when that text arrived, so every match
        # here ends inside `text`.
        window = self._sent_tail + text
        ends = [window.find(s) + len(s) for s in self.stop if s in window]
        if ends:
            self.stopped = True
            return window[len(self._sent_tail): min(ends)]
        self._sent_tail = window[-self._tail_chars:] if self._tail_chars else ""
        return text

    def _longest_partial_match(self, text: str) -> int:
        """Length of the longest suffix of `text` that is a proper prefix of a stop string."""
        best = 0
        for s in self.stop:
            for n in range(min(len(s) - 1, len(text)), best, -1):
                if text.endswith(s[:n]):
                    best = n
                    break
        return best
