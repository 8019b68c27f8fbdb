"""tests/waiting.py: returns what the condition returned as soon as it holds; names what never happened."""

import asyncio
import itertools
import time

import pytest

from waiting import wait_until, wait_until_async


def test_returns_the_first_truthy_value_without_waiting_out_the_timeout():
    calls = itertools.count(1)
    start = time.monotonic()
    assert wait_until(lambda: next(calls) >= 3 and "ready", timeout=30, what="the third call") == "ready"
    assert next(calls) == 4 and time.monotonic() - start < 10  # polled three times, not 30 s


def test_a_condition_that_never_holds_fails_naming_it():
    with pytest.raises(AssertionError, match=r"the server answering did not happen within 0.05 s \(last value: 0\)"):
        wait_until(lambda: 0, timeout=0.05, what="the server answering")


def test_async_version_lets_the_loop_run_the_task_that_makes_it_true():
    async def scenario():
        done = asyncio.Event()
        asyncio.get_running_loop().call_later(0.02, done.set)
        assert await wait_until_async(done.is_set, timeout=30, what="the event") is True
        with pytest.raises(AssertionError, match="never did not happen within 0.02 s"):
            await wait_until_async(lambda: None, timeout=0.02, what="never")

    asyncio.run(scenario())
