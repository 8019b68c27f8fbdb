"""Run an app under uvicorn with a SIGTERM drain and a one-line readiness announcement.

SIGTERM (or Ctrl-C) drains instead of stopping at once: new requests get 503, in-flight
ones finish for up to `drain_grace_s`, the rest are aborted, then uvicorn shuts down and
the process exits 0. A second signal exits without waiting.

Once the engine is warm, the socket listens and a streamed warm-up request went through
(`api.warmup`), one line goes to stdout (contract.ready_line
owns its format, for this server and the launcher that waits for it):
    servecap serve: ready on http://127.0.0.1:8000 (strategy=continuous, model=tiny, device=cpu)
so a parent can wait for it (and learn the port when it asked for `--port 0`). If the
engine process dies later, the server says why on stderr and exits 1.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys

import uvicorn

from contract.ready_line import ready_line

logger = logging.getLogger("reference_server.server")


class DrainingServer(uvicorn.Server):
    """uvicorn.Server whose first exit signal drains the runtime before shutting down."""

    def __init__(self, config: uvicorn.Config, runtime, drain_grace_s: float) -> None:
        super().__init__(config)
        self.runtime = runtime
        self.drain_grace_s = drain_grace_s
        self.loop: asyncio.AbstractEventLoop | None = None
        self._draining = False

    def handle_exit(self, sig, frame) -> None:
        # Not appending to uvicorn's captured signals: it would re-raise SIGTERM after
        # shutdown and the process would die by the signal instead of exiting 0.
        if self._draining or self.loop is None:
            self.should_exit = True
            self.force_exit = self._draining   # second signal: stop waiting on connections
            return
        self._draining = True
        self.loop.call_soon_threadsafe(lambda: self.loop.create_task(self._drain()))

    async def _drain(self) -> None:
        aborted = await self.runtime.drain(self.drain_grace_s)
        if aborted:
            logger.warning("drain grace period (%.1f s) over: aborted %d requests", self.drain_grace_s, aborted)
        self.should_exit = True


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket (port 0 = any free port); OSError if the address is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP, not 0: asyncio only disables Nagle on accepted sockets whose proto says
    # TCP. With Nagle on, each response's first small writes waited for the client's delayed
    # ACK (40 ms on Linux) and then left in one burst: +40 ms TTFT, tokens bunched behind it.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)   # inherited by accepted sockets on Linux
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def run_server(app, server_config, sock: socket.socket) -> int:
    """Serve `app` on `sock` until drained; returns the exit code (0, or 1 if the engine failed)."""
    config = uvicorn.Config(app, log_level=server_config.log_level, access_log=False, lifespan="on",
                            timeout_graceful_shutdown=5,
                            timeout_keep_alive=server_config.keep_alive_s)
    server = DrainingServer(config, app.state.runtime, server_config.drain_grace_s)
    app.state.runtime.listening = tuple(sock.getsockname()[:2])

    async def main() -> int:
        server.loop = asyncio.get_running_loop()
        watcher = asyncio.create_task(_announce_when_ready(server, sock))
        try:
            await server.serve(sockets=[sock])
        finally:
            watcher.cancel()
        return 1 if app.state.runtime.failed else 0

    return asyncio.run(main())


async def _announce_when_ready(server: DrainingServer, sock: socket.socket, poll_s: float = 0.02) -> None:
    runtime = server.runtime
    while not (server.started and runtime.ready):   # engine warm, then the HTTP path (api.warmup)
        if runtime.failed:
            print(f"servecap serve: error: {runtime.failed}", file=sys.stderr, flush=True)
            server.should_exit = True
            return
        await asyncio.sleep(poll_s)
    host, port = sock.getsockname()[:2]
    url_host = f"[{host}]" if ":" in host else host
    description = runtime.engine.description
    grpc = {"grpc": f"{url_host}:{runtime.grpc_port}"} if runtime.grpc_port is not None else {}
    split = description.get("disaggregation") or {}
    role = {"role": split["role"]} if split.get("role", "both") != "both" else {}
    print(ready_line(f"http://{url_host}:{port}", strategy=description.get("strategy"),
                     model=runtime.served_model_name, device=description.get("device"), **role, **grpc), flush=True)
    while not runtime.failed:   # an engine process that dies takes the server down with it (exit 1),
        await asyncio.sleep(0.1)   # so a supervisor restarts it instead of routing to a 503 forever
    print(f"servecap serve: error: {runtime.failed}", file=sys.stderr, flush=True)
    await asyncio.sleep(0.2)   # in-flight streams already got their engine_failure error: let them flush
    server.should_exit = True
