"""Stop strings for streamed text: emit what cannot start a stop string, hold back the rest.

A stop string may arrive split over several tokens ("\\n\\n" as "\\n" + "\\n"), so the
tail of the text that is a prefix of some stop string is held back until it either
completes a stop string (generation ends there, the stop string itself is not
returned, as in OpenAI's API) or stops matching (it is released).
"""

from __future__ import annotations


class StopStringMatcher:
    """Feed decoded text pieces; get back the text that is safe to send."""

    def __init__(self, stop: tuple[str, ...] = ()) -> None:
        if any(not s for s in stop):
            raise ValueError("stop strings must be non-empty")
        self.stop = tuple(stop)
        self._held = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        """Safe text from `text`; after a match `stopped` is True and later calls return ''."""
        if self.stopped:
            return ""
        if not self.stop:
            return text
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

    def _longest_partial_match(self, text: str) -> int:
        """Length of the longest suffix of `text` that is a proper prefix of a stop string."""
        best = 0
        for s in self.stop:
            for n in range(min(len(s) - 1, len(text)), best, -1):
                if text.endswith(s[:n]):
                    best = n
                    break
        return best
