"""How late this process's event loop runs a timer: the load generator's own error bar (as jHiccup does).

A kernel timer ticks every PROBE_INTERVAL_S on a fixed schedule (a Linux timerfd, CLOCK_MONOTONIC,
absolute deadlines, so the schedule never drifts), and a greenlet waits on its file descriptor the
way a Locust user waits on its socket for the next chunk: the loop's epoll sees it readable, the
hub switches to the greenlet. Each tick's lag is how much later than its deadline the greenlet ran.
Whatever delays that delays, by as much, the reading of a response chunk that arrived meanwhile: a
busy loop (parsing, other greenlets, GC), a descheduled process (CPU contention), page faults. So
the lag's distribution bounds the error the generator adds to TTFT and ITL.

A stalled loop misses ticks; each missed tick is counted with its own lag (now - its deadline),
as HdrHistogram's expected-interval correction does, so a 40 ms stall weighs 40 samples and not one.

Why not `gevent.sleep(interval)` in a loop (the probe before this one, still the fallback where
there is no timerfd): libev's epoll backend rounds every wait up to a whole millisecond and waits
at least 1 ms, so that probe read up to ~1 ms of lateness the loop did not have. Measured on 2
cores (tiny, continuous, 16 streams, Locust at SCHED_FIFO): sleep probe p99 1.2-1.4 ms against a
packet capture's TTFT |error| p99 0.14-0.20 ms; a socket's readiness, like the timerfd's, is not
rounded.

Samples before `measure_from` (perf_counter s: the end of the warm-up) are not kept, so start-up
bursts do not count, and the probe stops when the test starts stopping (Locust's
`test_stopping`), so the teardown does not either: a read that comes after `stop()` is dropped,
since the ticks it counts late are the stopping's own work. Costs one wake-up per interval (~1k/s): a few
microseconds each.
"""

from __future__ import annotations

import ctypes
import os
import struct
import time
from array import array

import gevent
import numpy as np
from gevent.socket import wait_read

PROBE_INTERVAL_S = 1e-3

_CLOCK_MONOTONIC = 1                     # <time.h>; time.perf_counter reads the same clock on Linux
_TFD_NONBLOCK, _TFD_CLOEXEC = os.O_NONBLOCK, 0o2000000
_TFD_TIMER_ABSTIME = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _timespec(seconds: float) -> _Timespec:
    whole = int(seconds)
    return _Timespec(whole, int(round((seconds - whole) * 1e9)))


def periodic_timerfd(interval_s: float) -> tuple[int, float] | None:
    """A non-blocking timerfd ticking every interval_s from one interval from now:
    (fd, first deadline in CLOCK_MONOTONIC s), or None where there is none (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)   # this process's own symbols: libc is among them
        create, settime = libc.timerfd_create, libc.timerfd_settime
    except (OSError, AttributeError, TypeError):
        return None
    fd = create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
    if fd < 0:
        return None
    first = time.clock_gettime(time.CLOCK_MONOTONIC) + interval_s
    spec = _Itimerspec(_timespec(interval_s), _timespec(first))
    if settime(fd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
        os.close(fd)
        return None
    return fd, first


class LoopLagProbe:
    def __init__(self, interval_s: float = PROBE_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.measure_from = 0.0           # perf_counter s; earlier samples are dropped
        self.lag_s = array("d")           # one per tick: 8 bytes, ~29 MB per hour at 1 kHz
        self.kind = "timerfd"             # "timerfd" | "sleep" (the fallback), reported in the summary
        self._greenlet: gevent.Greenlet | None = None
        self._fd: int | None = None
        self._stopped = False   # set by stop(): a read after it is the teardown's, not the test's

    def start(self) -> None:
        timer = periodic_timerfd(self.interval_s)
        if timer is None:
            self.kind = "sleep"
            self._greenlet = gevent.spawn(self._sleep_forever)
            return
        self._fd, first = timer
        self._greenlet = gevent.spawn(self._tick_forever, self._fd, first)

    def stop(self) -> None:
        # kill(block=False) only schedules the kill: a probe whose timer came due meanwhile runs once more
        # first and would count every tick that the caller's own work held up (Locust's Runner.stop walks
        # inspect.stack() before it fires test_stopping: 35-49 ms, each 2 s round's p99 10-22 ms)
        self._stopped = True
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        if self._fd is not None:
            fd, self._fd = self._fd, None
            gevent.get_hub().loop.run_callback(os.close, fd)   # after the killed greenlet left wait_read

    def _tick_forever(self, fd: int, first: float) -> None:
        interval, keep, ticks = self.interval_s, self.lag_s.append, 0
        clock = time.perf_counter     # CLOCK_MONOTONIC on Linux: the timerfd's clock
        while True:
            wait_read(fd)
            now = clock()
            if self._stopped:
                return
            try:
                expired = struct.unpack("=Q", os.read(fd, 8))[0]
            except BlockingIOError:
                continue
            if now >= self.measure_from:
                for tick in range(ticks, ticks + expired):   # every tick since the last read, missed ones too
                    keep(max(0.0, now - (first + tick * interval)))
            ticks += expired

    def _sleep_forever(self) -> None:
        interval, clock, keep = self.interval_s, time.perf_counter, self.lag_s.append
        while True:
            before = clock()
            gevent.sleep(interval)
            after = clock()
            if self._stopped:
                return
            if before >= self.measure_from:
                keep(max(0.0, after - before - interval))

    def summary(self) -> dict:
        """{"loop_lag_p50_s", "loop_lag_p99_s", "loop_lag_max_s", "loop_lag_samples", "loop_lag_probe"};
        nulls without samples."""
        if not self.lag_s:
            return {"loop_lag_p50_s": None, "loop_lag_p99_s": None, "loop_lag_max_s": None, "loop_lag_samples": 0,
                    "loop_lag_probe": self.kind}
        lag = np.frombuffer(self.lag_s, dtype=np.float64)
        p50, p99 = np.percentile(lag, [50, 99])
        return {"loop_lag_p50_s": float(p50), "loop_lag_p99_s": float(p99), "loop_lag_max_s": float(lag.max()),
                "loop_lag_samples": int(len(lag)), "loop_lag_probe": self.kind}
