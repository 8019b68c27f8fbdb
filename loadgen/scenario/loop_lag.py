"""How late this process's event loop runs a timer: the load generator's own error bar (as jHiccup does).

A greenlet sleeps PROBE_INTERVAL_S again and again and records how much later than asked it woke
(`perf_counter` after - before - interval). Whatever delays the probe delays, by as much, the
reading of a response chunk that arrived meanwhile: a busy loop (parsing, other greenlets, GC),
a descheduled process (CPU contention), page faults. So the lag's distribution bounds the error
the generator adds to TTFT and ITL. Samples before `measure_from` (perf_counter s: the end of the
warm-up) are not kept, so start-up bursts do not count, and the probe stops when the test starts
stopping (Locust's `test_stopping`), so the teardown does not either.

Costs one wake-up per interval (~1k/s): a few microseconds each.
"""

from __future__ import annotations

import time
from array import array

import gevent
import numpy as np

PROBE_INTERVAL_S = 1e-3


class LoopLagProbe:
    def __init__(self, interval_s: float = PROBE_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.measure_from = 0.0           # perf_counter s; earlier samples are dropped
        self.lag_s = array("d")           # one per wake-up: 8 bytes, ~29 MB per hour at 1 kHz
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        self._greenlet = gevent.spawn(self._probe_forever)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def _probe_forever(self) -> None:
        interval, clock, keep = self.interval_s, time.perf_counter, self.lag_s.append
        while True:
            before = clock()
            gevent.sleep(interval)
            after = clock()
            if before >= self.measure_from:
                keep(max(0.0, after - before - interval))

    def summary(self) -> dict:
        """{"loop_lag_p50_s", "loop_lag_p99_s", "loop_lag_max_s", "loop_lag_samples"}; nulls without samples."""
        if not self.lag_s:
            return {"loop_lag_p50_s": None, "loop_lag_p99_s": None, "loop_lag_max_s": None, "loop_lag_samples": 0}
        lag = np.frombuffer(self.lag_s, dtype=np.float64)
        p50, p99 = np.percentile(lag, [50, 99])
        return {"loop_lag_p50_s": float(p50), "loop_lag_p99_s": float(p99), "loop_lag_max_s": float(lag.max()),
                "loop_lag_samples": int(len(lag))}
