"""A keep-alive HTTP/1.1 client for timing streamed responses (gevent sockets).

Why not Locust's HttpUser/FastHttpUser: their send path does per-request work after the
timestamp, and FastHttpUser's `iter_lines` reads 1024-byte blocks (a 50 ms TTFT read as
200 ms). Here a request is rendered to bytes beforehand (`request_bytes.http_request`),
the connection is taken from the pool before the clock starts, and `t_start` is taken
immediately before the one `sendall`. The response is parsed by geventhttpclient's C
parser (chunked decoding, keep-alive rules); `readline` returns each SSE line as soon as
its bytes arrive (recv returns whatever is there, it never waits to fill a block), and
each line is stamped with `time.perf_counter()` on arrival. JSON is parsed later.

The connection is opened before `t_start`: TTFT excludes TCP connect, as for any client
that keeps connections alive (the first request of a connection is the exception only
in the open-loop lateness, which records it).
"""

from __future__ import annotations

import socket
import time
from http.client import HTTPException

import gevent
import gevent.select
import gevent.socket
import gevent.ssl
from geventhttpclient.response import HTTPConnectionClosed, HTTPSocketResponse

from loadgen.client.exchange import Exchange
from loadgen.client.sse import shows_text
from loadgen.client.request_bytes import Target

_BLOCK = 64 * 1024
_MAX_IDLE = 4096


class ConnectionPool:
    """Idle keep-alive sockets to one target, most recently used first."""

    def __init__(self, target: Target, connect_timeout_s: float = 10.0) -> None:
        self.target = target
        self.connect_timeout_s = connect_timeout_s
        self._idle: list = []
        self._tls = gevent.ssl.create_default_context() if target.scheme == "https" else None

    def acquire(self) -> tuple[object, bool]:
        """(socket, reused): an idle socket that is still open, else a new connection."""
        while self._idle:
            sock = self._idle.pop()
            if _still_open(sock):
                return sock, True
            sock.close()
        return self.connect(), False

    def connect(self):
        sock = gevent.socket.create_connection((self.target.host, self.target.port), timeout=self.connect_timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)  # request timeouts are gevent.Timeouts around the whole exchange
        if self._tls is not None:
            sock = self._tls.wrap_socket(sock, server_hostname=self.target.host)
        return sock

    def release(self, sock) -> None:
        if len(self._idle) < _MAX_IDLE:
            self._idle.append(sock)
        else:
            sock.close()

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()


def _still_open(sock) -> bool:
    """An idle keep-alive socket that is readable has been closed (or sent junk) by the server."""
    try:
        readable, _, _ = gevent.select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


REPLICA_HEADER = "x-servecap-replica"   # reference_server/api/replica_header.py: the replica that answered


def send_request(sock, request: bytes, exchange: Exchange) -> None:
    """Stamp t_start and write the whole request: nothing else happens in between."""
    exchange.t_start = time.perf_counter()
    sock.sendall(request)


def run_exchange(pool: ConnectionPool, request: bytes, exchange: Exchange, *, stream: bool,
                 timeout_s: float, conn: tuple[object, bool] | None = None, sent: bool = False) -> None:
    """Send `request` (unless `sent`: the caller already did, on `conn`) and read the
    response into `exchange`, in place.

    Failures end up in `exchange.failure` ("timeout" | "error"); GreenletExit (the test
    stopping) propagates with `exchange` holding what arrived so far. A reused keep-alive
    connection that turns out closed before any response byte is replaced once by a new
    one and the request resent (with a new t_start).
    """
    sock, reused = conn or pool.acquire()
    timer = gevent.Timeout(timeout_s)
    timer.start()
    keep = False
    try:
        while True:
            try:
                if not sent:
                    send_request(sock, request, exchange)
                    sent = True
                response = HTTPSocketResponse(sock, block_size=_BLOCK)
                break
            except (HTTPConnectionClosed, ConnectionError):
                if not reused:
                    raise
                sock.close()
                sock, reused, sent = pool.connect(), False, False
        exchange.t_last = time.perf_counter()
        exchange.status_code = response.status_code
        exchange.replica = response.get(REPLICA_HEADER)
        is_sse = "text/event-stream" in str(response.get("content-type", ""))
        if stream and exchange.status_code == 200 and is_sse:
            lines = exchange.lines
            readline = response.readline
            clock = time.perf_counter
            shown = exchange.on_shown
            while True:
                line = readline(b"\n")
                if not line:
                    break
                now = clock()
                lines.append((now, line))
                exchange.t_last = now
                if shown is not None and line.startswith(b"data:") and shows_text(line):
                    shown()
                    shown = None
        else:
            while True:
                data = response.read(_BLOCK)
                if not data:
                    break
                exchange.body += data
                exchange.t_last = time.perf_counter()
        exchange.complete = bool(response.message_complete)
        keep = exchange.complete and not response.should_close()
        if exchange.on_shown is not None and exchange.complete and exchange.status_code == 200 and not exchange.lines:
            exchange.on_shown()
    except gevent.Timeout as exc:
        if exc is not timer:
            raise
        exchange.failure, exchange.failure_message = "timeout", f"no complete response within {timeout_s:g} s"
    except (OSError, HTTPException) as exc:  # HTTPException: geventhttpclient's parse errors
        exchange.failure = "error"
        exchange.failure_message = f"{type(exc).__name__}: {exc}"[:200]
    finally:
        timer.cancel()
        if keep:
            pool.release(sock)
        else:
            sock.close()
