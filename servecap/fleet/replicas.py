"""The fleet's replicas: processes started, made ready, drained and killed, each with its life on the
fleet's clock.

    pool = ReplicaPool(launch=lambda name: ReferenceServerSpec.from_flags([... "--replica-name", name]),
                       log_dir=out / "replicas", clock=clock)
    replica = pool.start(cold_start_s=20, on_ready=router_add)   # returns at once; on_ready when ready
    pool.drain(replica)      # SIGTERM: the server finishes what it holds, then exits
    pool.kill(replica)       # SIGKILL: what it held is lost

Replica k is named `r{k}` (a canary pool's `c{k}`), in the order they were asked for (the plan
numbers its replicas the same way). A replica's cold start is the later of its process being ready (GET /ready) and
`cold_start_s` after it was asked for: an emulated GPU loads no weights, so a GPU replica's load
time is given rather than measured. Starting runs on a thread per replica, so a slow start never
holds up the controller's decisions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from servecap.launch.process import ServerProcess, ServerStartError


@dataclass
class Replica:
    """One replica's life, in seconds on the fleet's clock (None: not yet)."""

    id: int
    name: str
    requested_s: float
    ready_s: float | None = None
    drain_s: float | None = None
    stopped_s: float | None = None
    killed: bool = False
    url: str = ""
    error: str | None = None
    process: ServerProcess | None = field(default=None, repr=False)
    cancelled: bool = field(default=False, repr=False)
    up: threading.Event = field(default_factory=threading.Event, repr=False)   # its start has returned

    @property
    def routable(self) -> bool:
        return self.ready_s is not None and self.drain_s is None and not self.killed

    @property
    def starting(self) -> bool:
        return self.ready_s is None and not self.cancelled and self.error is None


class ReplicaPool:
    def __init__(self, launch: Callable[[str], object], log_dir: Path, clock: Callable[[], float],
                 startup_timeout_s: float = 180.0, prefix: str = "r") -> None:
        """`prefix`: the names' (r0, r1, ...; a canary pool's c0, c1, ...)."""
        self.launch, self.log_dir, self.clock, self.prefix = launch, log_dir, clock, prefix
        self.startup_timeout_s = startup_timeout_s
        self.replicas: list[Replica] = []
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def start(self, cold_start_s: float = 0.0, on_ready: Callable[[Replica], None] | None = None,
              wait: bool = False) -> Replica:
        with self.lock:
            replica = Replica(id=len(self.replicas), name=f"{self.prefix}{len(self.replicas)}", requested_s=self.clock())
            self.replicas.append(replica)
        thread = threading.Thread(target=self._start, args=(replica, cold_start_s, on_ready),
                                  name=f"start-{replica.name}", daemon=True)
        self.threads.append(thread)
        thread.start()
        if wait:
            thread.join()
            if replica.error:
                raise ServerStartError(replica.error)
        return replica

    def _start(self, replica: Replica, cold_start_s: float, on_ready) -> None:
        process = ServerProcess(self.launch(replica.name), log_path=self.log_dir / f"{replica.name}.log",
                                startup_timeout_s=self.startup_timeout_s)
        replica.process = process
        try:
            process.start()
            replica.url = process.base_url
        except ServerStartError as exc:
            lines = str(exc).splitlines()
            replica.error = " ".join(dict.fromkeys([lines[0], lines[-1]]))   # what failed, and the log's last word
            process.close()
            return
        finally:
            replica.up.set()
        time.sleep(max(0.0, replica.requested_s + cold_start_s - self.clock()))
        if replica.cancelled:
            return
        if on_ready is not None:
            on_ready(replica)
        replica.ready_s = self.clock()

    def ready(self) -> list[Replica]:
        return [r for r in self.replicas if r.routable]

    def starting(self) -> list[Replica]:
        return [r for r in self.replicas if r.starting]

    def drain(self, replica: Replica) -> None:
        """Out of service: SIGTERM on a thread (the server finishes what it holds, then exits); a replica
        still starting is cancelled."""
        replica.drain_s = self.clock()
        if replica.ready_s is None:
            replica.cancelled = True
        thread = threading.Thread(target=self._stop, args=(replica,), name=f"stop-{replica.name}", daemon=True)
        self.threads.append(thread)
        thread.start()

    def _stop(self, replica: Replica) -> None:
        replica.up.wait()   # still spawning: stop it once it is up (or has failed)
        if replica.error is None:
            replica.process.stop()
        replica.stopped_s = self.clock()
        replica.process.close()

    def kill(self, replica: Replica) -> None:
        replica.killed = True
        replica.drain_s = replica.stopped_s = self.clock()
        if replica.process is not None:
            replica.process.kill()

    def close(self) -> None:
        """Stop every replica still running (the run is over)."""
        for replica in self.replicas:
            if replica.process is not None and replica.stopped_s is None:
                replica.process.stop(grace_s=10.0)
                replica.stopped_s = self.clock()
                replica.process.close()
        for thread in self.threads:
            thread.join(timeout=30)
