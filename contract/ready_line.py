"""The reference server's readiness announcement: one line on stdout, written by the server, read by the launcher.

    servecap serve: ready on http://127.0.0.1:8000 (strategy=continuous, model=tiny, device=cpu)

With --grpc-port it ends `, grpc=127.0.0.1:8001)`. The server prints it once the engine is warm and the socket listens, so a parent that
started it with `--port 0` learns both "ready" and the port from the same line.
"""

from __future__ import annotations

import re

READY_PREFIX = "servecap serve: ready on "
_READY_URL = re.compile(re.escape(READY_PREFIX) + r"(http://\S+)")
_READY_GRPC = re.compile(re.escape(READY_PREFIX) + r"http://\S+ \(.*?\bgrpc=([^,)\s]+)")


def ready_line(url: str, **details: object) -> str:
    """`ready_line("http://127.0.0.1:8000", strategy="none")` -> the line above (details in the given order)."""
    described = ", ".join(f"{key}={value}" for key, value in details.items())
    return f"{READY_PREFIX}{url}" + (f" ({described})" if described else "")


def ready_url(output: str) -> str | None:
    """The base URL of the first ready line in a process's output, else None."""
    match = _READY_URL.search(output)
    return match.group(1) if match else None


def ready_grpc(output: str) -> str | None:
    """HOST:PORT of the KServe V2 gRPC service named in the first ready line (`grpc=...`), else None."""
    match = _READY_GRPC.search(output)
    return match.group(1) if match else None
