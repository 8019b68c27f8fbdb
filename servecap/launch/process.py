"""Start a server subprocess from a launch spec, wait until it is ready, drain it when done.

    with ServerProcess(ReferenceServerSpec.from_flags(["--model", "tiny"])) as server:
        requests.get(server.base_url + "/v1/models")
    # leaving the block sends SIGTERM (the server drains in-flight requests), killing only if it hangs

The one launcher for the sweep, the tests and the benchmarks. A spec says how to start
(`command(port)`) and how to tell it is ready (`ready_url(port, output)`): the reference
server binds `--port 0` and announces its URL on its ready line (no port race); a
`CommandSpec` gets a free port picked here, retried when the bind loses a race.
The child's stdout and stderr go to `log_path` (the sweep's server-<strategy>.log) or to
a temporary file; a failed start raises ServerStartError quoting the end of that log.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Protocol

PORT_ATTEMPTS = 3   # a picked free port can be taken before the child binds it
POLL_S = 0.05


class LaunchSpec(Protocol):
    label: str                # names the server in messages
    needs_free_port: bool     # False: it binds port 0 itself and says where

    def command(self, port: int) -> list[str]: ...

    def ready_url(self, port: int, output: str) -> str | None: ...


class ServerStartError(RuntimeError):
    """The server exited or never became ready; the message quotes the end of its log."""


class _PortTaken(ServerStartError):
    """The picked port was bound by someone else before the child bound it: try another."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _lost_port_race(output: str) -> bool:
    return "address already in use" in output.lower()


class ServerProcess:
    """A live server subprocess.

    Attributes:
        spec: what was started.
        base_url: http://HOST:PORT once ready.
        command: the argv that was started (the last attempt's).
        process: the Popen.
        log_path: where its output goes (None: a temporary file, read with log_tail()).
    """

    def __init__(self, spec: LaunchSpec, *, log_path: Path | None = None, startup_timeout_s: float = 180.0,
                 env: dict[str, str] | None = None, cwd: str | Path | None = None) -> None:
        self.spec = spec
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        self.env = env
        self.cwd = cwd
        self.base_url = ""
        self.ready_s: float | None = None   # seconds from spawn to ready, once ready
        self.command: list[str] = []
        self.process: subprocess.Popen | None = None
        self._log = None
        self._log_start = 0   # this start's output begins here (a log file may hold earlier runs)

    # -- start ------------------------------------------------------------------------------
    def start(self) -> ServerProcess:
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "ab+")
        else:
            self._log = tempfile.TemporaryFile()
        attempts = PORT_ATTEMPTS if self.spec.needs_free_port else 1
        for attempt in range(attempts):
            port = free_port() if self.spec.needs_free_port else 0
            self._spawn(self.spec.command(port))
            try:
                self._wait_ready(port)
                return self
            except _PortTaken:
                if attempt == attempts - 1:
                    raise

    def _spawn(self, command: list[str]) -> None:
        self._log_start = os.fstat(self._log.fileno()).st_size
        self.command = command
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env={**os.environ, **(self.env or {}), "PYTHONUNBUFFERED": "1"}, cwd=self.cwd)

    def _wait_ready(self, port: int) -> None:
        started = time.monotonic()
        deadline = started + self.startup_timeout_s
        while time.monotonic() < deadline:
            exited = self.process.poll() is not None
            url = None if exited else self.spec.ready_url(port, self.output())
            if url:
                self.base_url = url
                self.ready_s = time.monotonic() - started   # spawn to ready: a replica's cold start
                return
            if exited:
                lost_port = self.spec.needs_free_port and _lost_port_race(self.output())
                raise (_PortTaken if lost_port else ServerStartError)(
                    f"{self.spec.label} exited with code {self.process.returncode} before it was ready"
                    f"{self._log_hint()}:\n{self.log_tail()}")
            time.sleep(POLL_S)
        self.stop(grace_s=5.0)
        raise ServerStartError(f"{self.spec.label} not ready after {self.startup_timeout_s:.0f} s{self._log_hint()}:"
                               f"\n{self.log_tail()}")

    # -- output -----------------------------------------------------------------------------
    @property
    def grpc_target(self) -> str | None:
        """HOST:PORT of the server's KServe V2 gRPC service (`--grpc-port`), from its ready line; else None."""
        from contract.ready_line import ready_grpc

        return ready_grpc(self.output())

    def output(self) -> str:
        """Everything this start has written to stdout and stderr so far."""
        if self._log is None:
            return ""
        fd = self._log.fileno()
        return os.pread(fd, os.fstat(fd).st_size - self._log_start, self._log_start).decode(errors="replace")

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.output().splitlines()[-lines:]) or "(no output)"

    def _log_hint(self) -> str:
        return f" (log: {self.log_path})" if self.log_path else ""

    # -- stop -------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def stop(self, grace_s: float = 60.0) -> int | None:
        """SIGTERM (the server drains in-flight requests), SIGKILL if it outlives `grace_s`; the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> ServerProcess:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.close()

    def close(self) -> None:
        """Kill it if still running and release the log file."""
        self.kill()
        if self._log is not None:
            self._log.close()
            self._log = None
