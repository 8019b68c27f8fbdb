"""Any server command as a launch spec: a free loopback port goes into `{port}`, readiness is GET ready_path == 200.

    CommandSpec(("vllm", "serve", "facebook/opt-125m", "--port", "{port}"), ready_path="/health")

Without a ready path, the server is ready when GET /ready answers 200, or, for a server that has no
/ready (it answers 404), when GET /health does: a reference server answers /health while it still
loads its model and /ready once it serves; vLLM, SGLang and TGI start their HTTP server once the
model is loaded and serve /health only.

For servers that cannot bind port 0 and announce it (vLLM, TGI, a stock uvicorn app).
The launcher picks a free port, which another process can take between the pick and the
bind: a start that fails with "address already in use" is retried on a fresh port. A
foreign server that grabs the port and answers ready_path first is not detected.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import requests

PORT = "{port}"


@dataclass(frozen=True)
class CommandSpec:
    """argv with `{port}` where the port goes (substituted textually, so `--port={port}` works too)."""

    argv: tuple[str, ...]
    ready_path: str | None = None
    host: str = "127.0.0.1"

    needs_free_port = True

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("the server command is empty")
        if not any(PORT in arg for arg in self.argv):
            raise ValueError(f"the server command must say where its port goes with {PORT}: {' '.join(self.argv)}")
        if self.ready_path is not None and not self.ready_path.startswith("/"):
            raise ValueError(f"--ready-path must start with '/', got {self.ready_path!r}")

    @property
    def label(self) -> str:
        return os.path.basename(self.argv[0])

    def command(self, port: int) -> list[str]:
        return [arg.replace(PORT, str(port)) for arg in self.argv]

    def ready_url(self, port: int, output: str) -> str | None:
        base_url = f"http://{self.host}:{port}"
        try:
            status = requests.get(base_url + (self.ready_path or "/ready"), timeout=2).status_code
            if status == 404 and self.ready_path is None:
                status = requests.get(base_url + "/health", timeout=2).status_code
        except requests.RequestException:
            return None
        return base_url if status == 200 else None
