"""The engine's default torch threads: a core left to the front end, or the pinned cores."""

import pytest

from reference_server.runtime import engine_threads as module
from reference_server.runtime.engine_threads import engine_threads


@pytest.mark.parametrize("cores, expected", [(1, 1), (2, 1), (16, 15)])
def test_unpinned_the_engine_leaves_one_core(monkeypatch, cores, expected):
    monkeypatch.setattr(module.os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert engine_threads() == expected


def test_pinned_the_engine_takes_a_thread_per_core(monkeypatch):
    monkeypatch.setattr(module.os, "sched_getaffinity", lambda pid: {0})   # the caller's own cores do not count
    assert engine_threads((2, 3, 5)) == 3
