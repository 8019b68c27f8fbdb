"""How to start the reference server: a typed launch spec that renders its own argv.

    spec = ReferenceServerSpec.from_flags(["--model", "tiny", "--max-num-seqs", "16"])
    spec = dataclasses.replace(spec, strategy="none", engine_cpus=(1,), num_threads=1, server_cpus=(0,))
    spec.serve_args()  -> ["--model", "tiny", "--strategy", "none", "--max-num-seqs", "16",
                           "--engine-cpus", "1", "--num-threads", "1"]
    spec.command(0)    -> ["taskset", "-c", "0", python, "-m", "reference_server", "--port", "0", *serve_args]

Placement (engine mode, engine cores, front-end cores, torch threads) is typed, so a
caller such as the sweep's CPU plan fills what the user left unset by reading fields,
not flags. Everything else the server takes (the strategy's limits, admission, the
classifier) rides in `options`, normalized by the server's own parser. The server is
always started as a subprocess (`python -m reference_server`), never imported: this
module and its users stay free of torch.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from contract.ready_line import ready_url
from servecap.launch.serve_flags import parse_serve_flags, render_serve_flags, server_default

_TYPED = ("model", "strategy", "engine_mode", "engine_cpus", "num_threads", "host")


def taskset_prefix(cores: Sequence[int] | None) -> list[str]:
    """`taskset -c 0,2` (util-linux) as a command prefix: the affinity holds before the child starts a thread."""
    return ["taskset", "-c", ",".join(str(core) for core in cores)] if cores else []


@dataclass(frozen=True)
class ReferenceServerSpec:
    """One reference server to start. None leaves the server's own default.

    Attributes:
        model: preset or checkpoint dir (`--model`).
        strategy: batching strategy (`--strategy`).
        engine_mode: "process" (the engine in a process of its own) or "thread" (`--engine-mode`).
        engine_cpus: cores for the engine process (`--engine-cpus`); () = unpinned.
        server_cpus: cores for the serving (HTTP front-end) process, applied with a taskset prefix; () = unpinned.
        num_threads: torch CPU threads (`--num-threads`).
        host: bind address (`--host`; the server's default is 127.0.0.1).
        options: every other `servecap serve` flag (the strategy's limits, admission, classifier), as argv.
    """

    model: str | None = None
    strategy: str | None = None
    engine_mode: str | None = None
    engine_cpus: tuple[int, ...] = ()
    server_cpus: tuple[int, ...] = ()
    num_threads: int | None = None
    host: str | None = None
    options: tuple[str, ...] = ()

    label = "reference server"
    needs_free_port = False   # it binds `--port 0` and names its port on the ready line

    def __post_init__(self) -> None:
        if self.engine_mode not in (None, "process", "thread"):
            raise ValueError(f"engine_mode must be 'process' or 'thread', got {self.engine_mode!r}")
        if self.engine_cpus and not self.engine_process:
            raise ValueError("--engine-cpus needs --engine-mode process: an engine thread runs on the server's cores")
        if self.num_threads is not None and self.num_threads < 1:
            raise ValueError(f"--num-threads must be at least 1, got {self.num_threads}")
        if any(core < 0 for core in (*self.engine_cpus, *self.server_cpus)):
            raise ValueError("core numbers must not be negative")

    @classmethod
    def from_flags(cls, flags: Sequence[str]) -> ReferenceServerSpec:
        """A spec from `servecap serve` flags, parsed once by the server's own parser.
        ValueError for a flag the server does not take, a bad value, or `--port` (the launcher owns it)."""
        given = parse_serve_flags(flags)
        if "port" in given:
            raise ValueError("--port is chosen by the launcher (the server binds --port 0 and announces its port)")
        typed = {name: given.pop(name) for name in _TYPED if name in given}
        return cls(**typed, options=tuple(render_serve_flags(given)))

    @property
    def engine_process(self) -> bool:
        """True when the engine runs in a process of its own (the server's default)."""
        return (self.engine_mode or server_default("engine_mode")) == "process"

    def serve_args(self) -> list[str]:
        """The `servecap serve` flags this spec stands for (what run.json records as the server's command)."""
        head = render_serve_flags({"model": self.model, "strategy": self.strategy, "engine_mode": self.engine_mode,
                                   "host": self.host})
        tail = render_serve_flags({"engine_cpus": self.engine_cpus or None, "num_threads": self.num_threads})
        return [*head, *self.options, *tail]

    def command(self, port: int = 0) -> list[str]:
        return [*taskset_prefix(self.server_cpus), sys.executable, "-m", "reference_server", "--port", str(port),
                *self.serve_args()]

    def ready_url(self, port: int, output: str) -> str | None:
        """Ready once the server printed its ready line (the URL carries the port it bound)."""
        return ready_url(output)
