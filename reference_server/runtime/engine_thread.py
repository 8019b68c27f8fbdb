"""The engine on a thread of the serving process (`--engine-mode thread`).

    event loop                         engine thread (EngineLoop)
    ----------                         --------------------------
    add_request() / abort()         -> commands deque (under a Condition)
    queues  <- call_soon_threadsafe(_dispatch, one step's items)

Simple and light (one process, one copy of torch), and the way to run an engine built by
a factory that cannot cross a process boundary (tests wrap `Engine` in subclasses). But the
engine's Python (scheduler, block manager, sampling) and the event loop share one GIL:
when both are busy, tokens reach clients in bursts and step times wander from run to run
(see `lab.reference_server.gil`). The default, `EngineProcess`, avoids that.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from reference_server.runtime.engine_client import EngineClient, RequestAborted
from reference_server.runtime.engine_loop import ACCEPTED, EngineFailure, EngineLoop, describe_start_failure

__all__ = ["ACCEPTED", "AsyncEngine", "EngineFailure", "RequestAborted"]

logger = logging.getLogger("reference_server.runtime.engine_thread")

_STOP = object()


class AsyncEngine(EngineClient):
    """Owns the engine thread. Build with a factory so the model loads on that thread.

    Args:
        build_engine: returns a ready-to-warm `Engine` (called on the engine thread).
        metrics: a `ServerMetrics`, updated after every step (optional).
        idle_poll_s: see `EngineLoop`.
        record_log: an `EngineRecordLog`, fed each step's records (optional).
    """

    def __init__(self, build_engine: Callable[[], object], *, metrics=None, idle_poll_s: float = 0.005,
                 record_log=None) -> None:
        super().__init__(metrics, record_log)
        self._build_engine = build_engine
        self._idle_poll_s = idle_poll_s
        self._cond = threading.Condition()
        self._commands: deque = deque()
        self._thread: threading.Thread | None = None
        self.engine = None                 # read-only from other threads (tests inspect it)

    def start(self) -> None:
        """Start the engine thread; call from the running event loop."""
        self._bind_loop()
        self._thread = threading.Thread(target=self._run, name="engine", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._submit(_STOP)
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _submit(self, command) -> None:
        with self._cond:
            self._commands.append(command)
            self._cond.notify()

    # --- engine thread ---------------------------------------------------------------
    def _run(self) -> None:
        try:
            engine = self._build_engine()
            engine.warmup()
            description = engine.describe()
        except Exception as exc:  # the process reports it and exits; never a silent hang
            if not isinstance(exc, ValueError):   # bad config is said in one line; a bug gets its traceback
                logger.exception("engine failed to start")
            self._set_failed(f"engine failed to start: {describe_start_failure(exc)}")
            return
        self.engine = engine
        self._set_ready(description)
        EngineLoop(engine, self._next_commands, self._deliver, idle_poll_s=self._idle_poll_s,
                   stream_interval=engine.config.stream_interval).run()

    def _next_commands(self, timeout_s: float | None) -> list | None:
        with self._cond:
            if not self._commands and timeout_s != 0:
                self._cond.wait(timeout=timeout_s)
            commands = list(self._commands)
            self._commands.clear()
        if any(command is _STOP for command in commands):
            return None
        return commands
