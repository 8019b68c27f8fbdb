"""The garbage collector's pauses in this Locust process: a named cause of loop lag.

CPython's cyclic collector stops the event loop while it runs; a full (generation 2) collection
walks every tracked object, and after Locust's and gevent's imports that is a few hundred
thousand. `GcPauses` times every collection through `gc.callbacks`; the summary gives how many
ran and the longest, per generation, so a loop-lag spike can be told from a GC pause.
"""

from __future__ import annotations

import gc
import time


class GcPauses:
    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.max_s = [0.0, 0.0, 0.0]
        self.total_s = 0.0
        self._started = 0.0

    def start(self) -> None:
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)

    def stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        pause = time.perf_counter() - self._started
        generation = info.get("generation", 0)
        self.count[generation] += 1
        self.max_s[generation] = max(self.max_s[generation], pause)
        self.total_s += pause

    def summary(self) -> dict:
        """{"gc_collections": [gen0, gen1, gen2], "gc_pause_max_s": [..], "gc_pause_total_s": s}."""
        return {"gc_collections": list(self.count), "gc_pause_max_s": list(self.max_s),
                "gc_pause_total_s": self.total_s}
