"""Start `python -m reference_server` as a subprocess and wait until it is ready.

    with ServerProcess(["--model", "tiny", "--max-waiting", "4"]) as server:
        requests.get(server.base_url + "/v1/models")
    # leaving the block sends SIGTERM and waits (drain), killing only if it hangs

Used by the tests and `bench_overload`. The server picks a free port (`--port 0`) and
announces it on its ready line, so parallel servers never race for a port.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

from reference_server.api.server import READY_PREFIX

_READY_RE = re.compile(re.escape(READY_PREFIX) + r"(http://\S+)")


class ServerProcess:
    """A live reference server. Attributes: base_url, process (Popen), ready_line."""

    def __init__(self, args: list[str] = (), *, startup_timeout_s: float = 120.0, env: dict | None = None,
                 cwd: str | None = None) -> None:
        self.args = ["--port", "0", *args]
        self.startup_timeout_s = startup_timeout_s
        self.env = env
        self.cwd = cwd
        self.base_url: str = ""
        self.ready_line: str = ""
        self.process: subprocess.Popen | None = None
        self._stderr = tempfile.TemporaryFile(mode="w+b")

    def start(self) -> ServerProcess:
        env = {**os.environ, **(self.env or {}), "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reference_server", *self.args],
            stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env, cwd=self.cwd)
        found = threading.Event()

        def read_stdout() -> None:   # keeps draining stdout so the child never blocks on it
            for line in self.process.stdout:
                match = _READY_RE.search(line)
                if match and not found.is_set():
                    self.ready_line, self.base_url = line.strip(), match.group(1)
                    found.set()

        threading.Thread(target=read_stdout, daemon=True).start()
        deadline = time.monotonic() + self.startup_timeout_s
        while not found.wait(0.05):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"reference server did not become ready (exit {self.process.returncode}):\n"
                                   f"{self.stderr_tail()}")
        return self

    @property
    def pid(self) -> int:
        return self.process.pid

    def stderr_tail(self, max_chars: int = 4000) -> str:
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-max_chars:]

    def terminate(self, timeout_s: float = 60.0) -> int:
        """SIGTERM (drain), wait for exit; returns the exit code (kills it if it hangs)."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.process.returncode

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.terminate()
        self._stderr.close()
