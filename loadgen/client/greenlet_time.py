"""Waiting inside a gevent process without losing precision or starving other greenlets."""

from __future__ import annotations

import time

import gevent


def sleep_until(t_perf: float, spin_s: float = 0.0) -> None:
    """Sleep until perf_counter() >= t_perf.

    gevent's loop caches "now" per iteration (a timer armed after a long blocking call
    fires early), so it is refreshed and the time re-checked. libev's epoll backend rounds
    timeouts up to whole milliseconds, so with `spin_s` the last stretch is spent in
    `gevent.sleep(0)` (other greenlets keep running) to hit the time within microseconds.
    """
    loop = gevent.get_hub().loop
    while True:
        remaining = t_perf - time.perf_counter()
        if remaining <= 0:
            return
        if remaining <= spin_s:
            gevent.sleep(0)
            continue
        loop.update_now()
        gevent.sleep(remaining - spin_s)


def yield_now() -> None:
    """Let other greenlets read their chunks while a finished request is post-processed."""
    gevent.sleep(0)
