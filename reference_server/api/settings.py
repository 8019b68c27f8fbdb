"""Configuration of the HTTP serving layer (the engine's own is `reference_server.engine.config.EngineConfig`)."""

from __future__ import annotations

from dataclasses import dataclass

ENGINE_MODES = ("process", "thread")


@dataclass(frozen=True)
class ServerConfig:
    """How the process serves, apart from the engine.

    Attributes:
        host: bind address; loopback unless told otherwise.
        port: TCP port; 0 = let the OS pick (the ready line prints the real one).
        served_model_name: the `model` clients must send; None = the engine's model name.
        api_key: when set, every /v1 and /v2 route needs `Authorization: Bearer <api_key>`.
        max_waiting: admitted-but-not-started generation requests allowed before 429; None = no limit.
        retry_after_s: `Retry-After` seconds sent with 429 and 503.
        drain_grace_s: after SIGTERM, how long in-flight requests may run before they are aborted.
        max_body_bytes: request bodies above this get 413.
        keep_alive_s: how long an idle keep-alive connection stays open. Longer than uvicorn's 5 s
            default, so a client reusing a pooled connection rarely races the server closing it.
        log_level: uvicorn's log level.
        engine_mode: "process" runs the engine in its own process (no GIL shared with the event
            loop: steady token timing); "thread" on a thread of the serving process (lighter).
        engine_cpus: cores the engine process is pinned to (e.g. the ones the load generator and
            the HTTP front end do not use); () = not pinned. Process mode only.
        reasoning_tokens: a length distribution (contract.distributions: 256, uniform:128:512, ...): each
            chat request that names no `reasoning_tokens` reasons for a draw of it first; None = no reasoning.
        reasoning_effort_tokens: EFFORT=DIST,... (`contract.reasoning_effort`): what a request's
            `reasoning_effort` draws its reasoning from; efforts left out keep the default's.
        grpc_port: also serve KServe V2 over gRPC (the classifier) on this port; 0 = any free one
            (the ready line names it); None = REST only.
        replica_name: this server's name in a fleet; every response then carries it in the
            `x-servecap-replica` header, which a router passes back, so a client's record says
            which replica served it. None = no header.
        faults: faults set at start (`reference_server.api.faults`: slow, errors, stall, crash specs).
        tool_call_rate: with tools offered and tool_choice auto, the share of replies that call one
            (`reference_server.api.tool_calls`; seeded draws).
    """

    host: str = "127.0.0.1"
    port: int = 8000
    served_model_name: str | None = None
    api_key: str | None = None
    max_waiting: int | None = None
    retry_after_s: int = 1
    drain_grace_s: float = 30.0
    max_body_bytes: int = 1 << 20
    keep_alive_s: float = 30.0
    log_level: str = "warning"
    engine_mode: str = "process"
    engine_cpus: tuple[int, ...] = ()
    replica_name: str | None = None
    grpc_port: int | None = None
    reasoning_tokens: str | None = None
    reasoning_effort_tokens: str = ""
    faults: tuple[str, ...] = ()
    tool_call_rate: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.tool_call_rate <= 1:
            raise ValueError(f"--tool-call-rate must be in [0, 1], got {self.tool_call_rate!r}")
        from reference_server.api.faults import Fault

        for spec in self.faults:
            Fault.parse(spec)   # ValueError names the bad spec
        if not self.host:
            raise ValueError("host must not be empty")
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {self.port!r}")
        if self.reasoning_tokens is not None:
            from contract.distributions import parse_length_distribution

            parse_length_distribution(self.reasoning_tokens, "--reasoning-tokens")   # ValueError names it
        from contract.reasoning_effort import parse_effort_tokens

        parse_effort_tokens(self.reasoning_effort_tokens)   # ValueError names the bad part
        if self.grpc_port is not None and (not isinstance(self.grpc_port, int) or not 0 <= self.grpc_port <= 65535):
            raise ValueError(f"--grpc-port must be in 0..65535, got {self.grpc_port!r}")
        if self.served_model_name is not None and not self.served_model_name.strip():
            raise ValueError("served_model_name must not be blank")
        if self.api_key is not None and not self.api_key:
            raise ValueError("api_key must not be empty (leave it unset to disable auth)")
        if self.max_waiting is not None and self.max_waiting < 0:
            raise ValueError(f"max_waiting must be >= 0, got {self.max_waiting!r}")
        if self.retry_after_s < 0:
            raise ValueError(f"retry_after_s must be >= 0, got {self.retry_after_s!r}")
        if self.drain_grace_s < 0:
            raise ValueError(f"drain_grace_s must be >= 0, got {self.drain_grace_s!r}")
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes must be at least 1024, got {self.max_body_bytes!r}")
        if not self.keep_alive_s > 0:
            raise ValueError(f"keep_alive_s must be positive, got {self.keep_alive_s!r}")
        if self.log_level not in ("critical", "error", "warning", "info", "debug", "trace"):
            raise ValueError(f"log_level must be a uvicorn log level, got {self.log_level!r}")
        if self.engine_mode not in ENGINE_MODES:
            raise ValueError(f"engine_mode must be one of {', '.join(ENGINE_MODES)}, got {self.engine_mode!r}")
        if any(cpu < 0 for cpu in self.engine_cpus):
            raise ValueError(f"engine_cpus must be core numbers >= 0, got {self.engine_cpus!r}")
        if self.replica_name is not None and not _header_token(self.replica_name):
            raise ValueError(f"replica_name must be letters, digits and -_.: (a header value), got {self.replica_name!r}")
        if self.engine_cpus and self.engine_mode != "process":
            raise ValueError("engine_cpus needs engine_mode 'process' (a thread shares its process's cores)")


def _header_token(text: str) -> bool:
    return bool(text) and len(text) <= 64 and all(c.isascii() and (c.isalnum() or c in "-_.:") for c in text)
