"""Run a serving process for a sweep: start it on a free loopback port, wait for GET /ready, drain it.

Generic on purpose: any command that serves the DESIGN.md /ready route works (the
reference server is started as `python -m reference_server`, never imported: this
package stays free of torch). The process's output goes to a log file in the run
directory so a failed start can be explained.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerStartError(RuntimeError):
    """The server exited or never became ready; the message quotes the end of its log."""


class ManagedServer:
    """A serving subprocess.

    Attributes:
        base_url: http://127.0.0.1:PORT once started.
        process: the Popen.
        log_path: where its stdout/stderr go.
    """

    def __init__(self, args: list[str], log_path: Path, *, startup_timeout_s: float = 180.0,
                 command_prefix: list[str] = ()) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.command = [*command_prefix, sys.executable, "-m", "reference_server", "--host", "127.0.0.1",
                        "--port", str(self.port), *args]
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        self.process: subprocess.Popen | None = None

    def start(self) -> "ManagedServer":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerStartError(f"server exited with code {self.process.returncode} before it was ready:\n"
                                       + self.log_tail())
            try:
                if requests.get(self.base_url + "/ready", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.stop()
        raise ServerStartError(f"server not ready after {self.startup_timeout_s:.0f} s:\n" + self.log_tail())

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM (the server drains in-flight requests), then SIGKILL if it hangs."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> "ManagedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
