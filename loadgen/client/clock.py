"""Unix timestamps from `time.perf_counter()`: monotonic, sub-microsecond, one anchor per process.

`time.time()` can step (NTP) and is coarse on some systems; every timestamp loadgen
writes is `wall0 + (perf_counter() - perf0)`, so differences between two stamps of one
process are exact perf_counter differences.
"""

from __future__ import annotations

import time


class Clock:
    def __init__(self) -> None:
        self.wall0, self.perf0 = time.time(), time.perf_counter()

    def unix(self, perf: float) -> float:
        """Unix time of a perf_counter reading."""
        return self.wall0 + (perf - self.perf0)

    def perf(self, unix: float) -> float:
        """perf_counter reading of a unix time."""
        return self.perf0 + (unix - self.wall0)

    def now(self) -> float:
        return self.unix(time.perf_counter())
