"""Helpers for the loadgen tests: a scripted SSE server and Locust as a subprocess.

Locust is never imported into the pytest process (it monkey-patches with gevent); every
run is `locust ...` or a python script in its own process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LOCUST = str(BIN / "locust")
CHAT = str(REPO / "loadgen" / "chat.py")


def _env() -> dict:
    """The repo first, then tests/ (so `run_python` scripts can use `waiting`), then the caller's path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests"), env.get("PYTHONPATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


@contextlib.contextmanager
def scripted_server(tmp_path: Path, *args: str):
    """Yield (base_url, truth_path) of a running `loadgen.bench.scripted_server`."""
    truth = tmp_path / f"truth-{time.monotonic_ns()}.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "loadgen.bench.scripted_server", "--port", "0", "--truth", str(truth), *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), cwd=REPO)
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on "), f"scripted server did not start: {line!r}"
        yield line.split()[-1], truth
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_locust(*args: str, timeout: float = 60, locustfile: str = CHAT) -> subprocess.CompletedProcess:
    """`locust -f loadgen/chat.py --headless --only-summary ARGS` to completion."""
    cmd = [LOCUST, "-f", locustfile, "--headless", "--only-summary", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(), cwd=REPO)


def start_locust(*args: str, locustfile: str = CHAT, headless: bool = True) -> subprocess.Popen:
    cmd = [LOCUST, "-f", locustfile, *(["--headless", "--only-summary"] if headless else []), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), cwd=REPO)


def run_python(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          env=_env(), cwd=REPO)


def read_truth(path: Path) -> dict[str, dict]:
    """Scripted server's log: response id -> {t_read, t_chunks, max_tokens, aborted, ...}."""
    out = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        out[row["id"]] = row
    return out
