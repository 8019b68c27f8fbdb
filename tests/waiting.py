"""Wait on a condition, never on the clock: poll a predicate until it holds or a deadline passes.

A test that sleeps "long enough" is slow when the machine is idle and flaky when it is busy;
these return as soon as the condition holds and, when it never does, fail naming what never
happened (`what`) and the last value seen.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 10.0, *, what: str, interval: float = 0.01) -> T:
    """Call `predicate` every `interval` s until it returns something truthy, and return that.
    AssertionError after `timeout` s: "<what> did not happen within <timeout> s"."""
    deadline = time.monotonic() + timeout
    while not _holds(value := predicate(), deadline, timeout, what):
        time.sleep(interval)
    return value


async def wait_until_async(predicate: Callable[[], T], timeout: float = 10.0, *, what: str,
                           interval: float = 0.01) -> T:
    """`wait_until` inside an event loop: yields to the loop between polls, so the tasks that
    make the condition true keep running."""
    deadline = time.monotonic() + timeout
    while not _holds(value := predicate(), deadline, timeout, what):
        await asyncio.sleep(interval)
    return value


def _holds(value: object, deadline: float, timeout: float, what: str) -> bool:
    if value:
        return True
    if time.monotonic() >= deadline:
        raise AssertionError(f"{what} did not happen within {timeout:g} s (last value: {value!r})")
    return False
