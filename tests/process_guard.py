"""Keeps `pytest -m "not slow"` honest: a test that starts a process must be marked `slow`.

Every process start in the pytest process is seen, whatever starts it (the test, a fixture,
product code it calls): Python's audit events `subprocess.Popen`, `os.fork`, `os.posix_spawn`,
`os.exec`, `os.spawn`, `os.system`, plus multiprocessing's spawn/forkserver, which start
children through `multiprocessing.util.spawnv_passfds` without an audit event.

A fixture that started a process is remembered, so every test using it counts as one that
starts a process, even when the fixture is session-scoped and already up. A test that starts
one and is not marked `slow` fails after its call with the command it started.
Registered from conftest.py (`pytest_plugins`).
"""

from __future__ import annotations

import multiprocessing.util
import os
import sys

import pytest

PROCESS_EVENTS = {"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn", "os.system"}

_started: list[str] = []             # what started since the current test began (commands, shortened)
# (where the fixture is defined, its name) -> the first command it started: two modules may each
# define a fixture `runs`, and only the one that starts processes makes its users slow
_process_fixtures: dict[tuple[str, str], str] = {}
_active = False                      # only count starts while a test runs, not pytest's own


def _describe(event: str, args: tuple) -> str:
    if event == "subprocess.Popen":  # (executable, args, cwd, env)
        argv = args[1]
        argv = [argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv)
        text = " ".join(os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in argv)
    else:
        text = f"{event}{args[:2]!r}"
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."


def _audit(event: str, args: tuple) -> None:
    if _active and event in PROCESS_EVENTS:
        _started.append(_describe(event, args))


sys.addaudithook(_audit)  # audit hooks cannot be removed; _active keeps this one quiet outside tests

_spawnv_passfds = multiprocessing.util.spawnv_passfds


def _spawnv_passfds_seen(path, args, passfds):
    if _active:
        _started.append("multiprocessing: " + " ".join(map(str, args))[:140])
    return _spawnv_passfds(path, args, passfds)


multiprocessing.util.spawnv_passfds = _spawnv_passfds_seen


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _active
    _started.clear()
    _active = True
    try:
        yield
    finally:
        _active = False


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    before = len(_started)
    yield
    if len(_started) > before:
        _process_fixtures.setdefault((fixturedef.baseid, fixturedef.argname), _started[before])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.passed or item.get_closest_marker("slow"):
        return
    reasons = [f"starts {command}" for command in dict.fromkeys(_started)]
    used = {(fixturedef.baseid, name) for name, fixturedefs in item._fixtureinfo.name2fixturedefs.items()
            for fixturedef in fixturedefs}
    reasons += [f"uses fixture {name!r}, which starts {command}"
                for (baseid, name), command in _process_fixtures.items() if (baseid, name) in used]
    if reasons:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} starts a process but is not marked slow "
                           f"(add @pytest.mark.slow, see tests/process_guard.py):\n  " + "\n  ".join(reasons[:5]))
