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
import urllib.parse
import urllib.request
from pathlib import Path

from servecap.launch.process import free_port

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
    """Yield (base_url, truth_path) of a running `lab.loadgen.scripted_server`."""
    truth = tmp_path / f"truth-{time.monotonic_ns()}.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "lab.loadgen.scripted_server", "--port", "0", "--truth", str(truth), *args],
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
    """`locust -f loadgen/chat.py --headless --only-summary ARGS` to completion; without a warm-up (every
    record measured) unless ARGS give --warmup."""
    warmup = [] if "--warmup" in args else ["--warmup", "0"]
    cmd = [LOCUST, "-f", locustfile, "--headless", "--only-summary", *warmup, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(), cwd=REPO)


def start_locust(*args: str, locustfile: str = CHAT, headless: bool = True) -> subprocess.Popen:
    warmup = [] if "--warmup" in args else ["--warmup", "0"]
    cmd = [LOCUST, "-f", locustfile, *(["--headless", "--only-summary"] if headless else []), *warmup, *args]
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


def http_get(url: str) -> str:
    """The body, or "" while nothing answers (for wait_until)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()
    except OSError:
        return ""


def http_post_form(url: str, form: dict) -> dict:
    data = urllib.parse.urlencode(form).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=5) as response:
        return json.loads(response.read())


@contextlib.contextmanager
def locust_web_ui(url: str, records: Path, *args: str):
    """`locust -f loadgen/chat.py` with its web UI on a free loopback port against `url`; yields the UI's base URL."""
    from waiting import wait_until

    port = free_port()
    ui = f"http://127.0.0.1:{port}"
    proc = start_locust("--host", url, "--web-host", "127.0.0.1", "--web-port", str(port), "--records", str(records),
                        *args, headless=False)
    try:
        wait_until(lambda: http_get(ui + "/"), timeout=30, interval=0.1, what="Locust's web UI")
        yield ui
    finally:
        proc.terminate()
        proc.wait(timeout=20)
