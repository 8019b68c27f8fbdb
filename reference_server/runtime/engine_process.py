"""The engine in its own process (the default, `--engine-mode process`), like vLLM's engine core.

    serving process                                  engine process (spawned)
    ---------------                                  ------------------------
    event loop: add_request()/abort()
      -> SimpleQueue -> sender thread  --pipe-->     EngineLoop: commands, step(), ...
    queues <- call_soon_threadsafe <- reader thread  <--pipe--  one message per step:
                                                      ("items", items, stats, new_tokens, did_work)

Why a process: the engine's Python (scheduler, block manager, sampling, postprocess) and
the HTTP event loop no longer share a GIL, so tokens reach clients as they are made and a
run's step times do not depend on how the two threads happened to interleave. The event
loop never blocks on the pipe: a sender thread writes commands, a reader thread turns each
step's message into one `call_soon_threadsafe`.

Messages from the engine process: ("ready", description) once built and warm, or
("failed", message) and exit; then ("items", ...) per step. The engine process ignores
SIGINT/SIGTERM (the serving process drains first, then says stop) and exits when the pipe
closes, so it never outlives the serving process. If it dies, every in-flight request gets
an `EngineFailure`, /ready turns 503 and new requests get 503 naming the exit code.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import pickle
import queue
import signal
import threading

from reference_server.runtime.engine_client import EngineClient
from reference_server.runtime.engine_loop import EngineFailure, EngineLoop, describe_start_failure

logger = logging.getLogger("reference_server.runtime.engine_process")

_STOP = ("stop",)


class EngineProcess(EngineClient):
    """Args:
        engine_config: the `EngineConfig` the child builds `Engine` from (it must pickle).
        cpus: cores the engine process runs on (`--engine-cpus`); () = those of this process.
        metrics: a `ServerMetrics`, updated by the reader thread after every step (optional).
        record_log: an `EngineRecordLog`, fed each step's records by the reader thread (optional).
    """

    def __init__(self, engine_config, *, metrics=None, idle_poll_s: float = 0.005, cpus: tuple[int, ...] = (),
                 record_log=None) -> None:
        super().__init__(metrics, record_log)
        self._engine_config = engine_config
        self._cpus = tuple(cpus)
        self._idle_poll_s = idle_poll_s
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._process = None
        self._threads: list[threading.Thread] = []
        self._stopping = False

    def start(self) -> None:
        """Spawn the engine process and the pipe threads; call from the running event loop."""
        self._bind_loop()
        context = multiprocessing.get_context("spawn")   # never fork a process that holds threads
        from_engine, engine_out = context.Pipe(duplex=False)
        engine_in, to_engine = context.Pipe(duplex=False)
        self._process = context.Process(target=engine_main, name="servecap-engine", daemon=True,
                                        args=(self._engine_config, engine_in, engine_out, self._idle_poll_s,
                                              self._cpus))
        self._process.start()
        engine_in.close()   # the child's ends: closed here so EOF means the child is gone
        engine_out.close()
        self._threads = [threading.Thread(target=self._send_forever, args=(to_engine,), name="engine-send",
                                          daemon=True),
                         threading.Thread(target=self._receive_forever, args=(from_engine,), name="engine-recv",
                                          daemon=True)]
        for thread in self._threads:
            thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopping = True
        self._outbox.put(_STOP)
        if self._process is None:
            return
        self._process.join(timeout_s)
        if self._process.is_alive():
            logger.warning("engine process did not stop in %.0f s; terminating it", timeout_s)
            self._process.kill()
            self._process.join(timeout_s)
        for thread in self._threads:
            thread.join(timeout_s)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _submit(self, command) -> None:
        self._outbox.put(command)

    # --- pipe threads ------------------------------------------------------------------
    def _send_forever(self, conn) -> None:
        try:
            while True:
                command = self._outbox.get()
                conn.send(command)
                if command is _STOP:
                    return
        except (OSError, ValueError):
            pass   # the engine process is gone; the reader reports it
        finally:
            conn.close()

    def _receive_forever(self, conn) -> None:
        try:
            while True:
                message = conn.recv()
                kind = message[0]
                if kind == "items":
                    self._deliver(*message[1:])
                elif kind == "ready":
                    self._set_ready(message[1])
                elif kind == "failed":
                    self._set_failed(message[1])
                    return
        except (EOFError, OSError):
            pass
        finally:
            conn.close()
        if not self._stopping:
            self._on_engine_death()

    def _on_engine_death(self) -> None:
        self._process.join(1.0)
        message = f"engine process exited unexpectedly (exit code {self._process.exitcode})"
        self._set_failed(message)   # the server prints it once and exits 1
        self._call_on_loop(self._fail_live, EngineFailure(message))


# --- the engine process ----------------------------------------------------------------
def _pin_to(cpus: tuple[int, ...]) -> None:
    try:
        os.sched_setaffinity(0, set(cpus))
    except (OSError, AttributeError) as exc:
        raise ValueError(f"--engine-cpus {','.join(map(str, cpus))}: cannot run on those cores "
                         f"({exc}); this machine has cores 0-{(os.cpu_count() or 1) - 1}") from None


def engine_main(engine_config, commands_in, items_out, idle_poll_s: float, cpus: tuple[int, ...] = ()) -> None:
    """Entry point of the spawned engine process: build, warm up, report, then loop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C reaches the whole process group;
    signal.signal(signal.SIGTERM, signal.SIG_IGN)   # the serving process decides when to stop
    logging.basicConfig(level=logging.WARNING, format="engine: %(levelname)s %(message)s")
    try:
        if cpus:   # before torch starts its threads, so they inherit the cores
            _pin_to(cpus)
        # torch-heavy: imported here; the serving process loads torch only to serve the classifier
        from reference_server.engine.engine import Engine
        engine = Engine(engine_config)
        engine.warmup()
        gc.collect()   # start-up's heap (torch, the model) out of the collector's reach: a later full
        gc.freeze()    # collection walks only what serving made, not the whole heap inside some step
        items_out.send(("ready", engine.describe()))
    except Exception as exc:   # the serving process prints the message; a traceback only for a bug
        if not isinstance(exc, ValueError):
            logger.exception("engine failed to start")
        items_out.send(("failed", f"engine failed to start: {describe_start_failure(exc)}"))
        return

    def next_commands(timeout_s: float | None) -> list | None:
        try:
            if not commands_in.poll(timeout_s):
                return []
            commands = []
            while True:   # everything already in the pipe, without waiting again
                command = commands_in.recv()
                if command == _STOP:
                    return None
                commands.append(command)
                if not commands_in.poll(0):
                    return commands
        except (EOFError, OSError):
            return None   # the serving process is gone

    def publish(items, stats, new_tokens: int, did_work: bool) -> None:
        try:
            items_out.send(("items", items, stats, new_tokens, did_work))
        except (pickle.PicklingError, TypeError, AttributeError):   # an exception item that cannot pickle
            items = [(request_id, EngineFailure(f"{type(item).__name__}: {item}")
                      if isinstance(item, BaseException) else item) for request_id, item in items]
            items_out.send(("items", items, stats, new_tokens, did_work))

    try:
        EngineLoop(engine, next_commands, publish, idle_poll_s=idle_poll_s,
                   stream_interval=engine.config.stream_interval).run()
    except (BrokenPipeError, EOFError):
        pass   # the serving process went away mid-send
