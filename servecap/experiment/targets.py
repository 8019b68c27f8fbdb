"""What serves an experiment's load: a target, and its options.

A target is one of:

    reference   the reference server (`servecap serve`): a preset or catalog model (`--model`), a
                batching strategy (`--strategies`, one target each), more flags (`--server-args`),
                `--emulate GPU` for an emulated GPU replica
    command     any engine started from a command with `{port}` in it (`--server-cmd "vllm serve
                ./ckpt --port {port}"`), ready when GET `--ready-path` answers 200
    url         an endpoint already running (`--url`): observed, never started or stopped

`add_target_arguments(parser)` declares these options once; sweep, compare (for what both arms
share), tune and fleet take them. Starting a target (`start`) gives a `LiveTarget`: where the load
goes, the model name it serves, its PID (for CPU time) and what run.json says of it.
"""

from __future__ import annotations

import contextlib
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import requests

from contract.options import add_options, option, options_from_args
from contract.run_json import ArmInfo
from contract.workload import WorkloadSpec
from servecap.experiment.cpu_pinning import CpuPlan
from servecap.experiment.external import describe_external
from servecap.launch.command import CommandSpec
from servecap.launch.process import ServerProcess, ServerStartError
from servecap.launch.spec import ReferenceServerSpec, taskset_prefix

KINDS = ("reference", "command", "url")
DEFAULT_MODEL = "tiny"
READY_HELP = "GET /ready is 200, or /health where a server has no /ready (vLLM, SGLang, TGI)"
CLASSIC_MODEL = {"classify": "tabular-mlp", "embed": "servecap-embed"}   # the reference server's names


@dataclass(frozen=True)
class TargetSpec:
    """One target. `key` names it in level ids, run.json and the records (a strategy, an arm, a
    configuration); None for an external target measured alone (its level ids have no prefix).

    reference: model, strategy (None: the server's default) and server_args (`servecap serve` flags);
    command: `command` with {port}, ready at `ready_path`; url: `url`. served_model: the model name
    sent in requests (None: the target's first GET /v1/models id, or the reference server's classic
    model for classify and embed). grpc_target: an external target's KServe V2 gRPC HOST:PORT (None:
    its URL's host, port 8001; a started reference server names its own)."""

    kind: str
    key: str | None = None
    model: str = DEFAULT_MODEL
    strategy: str | None = None
    server_args: str = ""
    command: str | None = None
    url: str | None = None
    ready_path: str | None = None
    served_model: str | None = None
    grpc_target: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a target is one of {', '.join(KINDS)}, got {self.kind!r}")
        try:
            shlex.split(self.server_args)
        except ValueError as exc:
            raise ValueError(f"--server-args is not valid shell quoting: {exc}") from None
        if self.kind == "command":
            try:
                argv = shlex.split(self.command or "")
            except ValueError as exc:
                raise ValueError(f"--server-cmd is not valid shell quoting: {exc}") from None
            CommandSpec(tuple(argv), ready_path=self.ready_path)   # names a missing {port}
        if self.kind == "url" and not str(self.url or "").startswith(("http://", "https://")):
            raise ValueError(f"--url must start with http:// or https://, got {self.url!r}")
        if self.ready_path is not None and not self.ready_path.startswith("/"):
            raise ValueError(f"--ready-path must start with '/', got {self.ready_path!r}")

    @property
    def external(self) -> bool:
        """Not the reference server: its engine, strategy and dtype are only what it tells."""
        return self.kind != "reference"

    def with_args(self, extra: str) -> "TargetSpec":
        """This target with more server flags: a reference server's `servecap serve` flags, or words
        added to a command (a tuned configuration)."""
        if not extra.strip():
            return self
        if self.kind == "reference":
            return replace(self, server_args=f"{self.server_args} {extra}".strip())
        if self.kind == "command":
            return replace(self, command=f"{self.command} {extra}")
        raise ValueError("an endpoint already running (--url) takes no server flags")

    def reference_spec(self, workload: WorkloadSpec) -> ReferenceServerSpec:
        """The reference server to start; ValueError, before anything starts, for a flag it would not take."""
        flags = shlex.split(self.server_args)
        if workload.scenario == "classify" and workload.protocol == "grpc" and "--grpc-port" not in flags:
            flags += ["--grpc-port", "0"]   # its ready line names the port
        if workload.classic and "--engine-mode" not in flags:
            # a classic model runs in the serving process: the idle LLM engine stays a thread there, so the
            # CPU plan gives that process the cores an engine process would have had
            flags += ["--engine-mode", "thread"]
        try:
            spec = ReferenceServerSpec.from_flags(flags)
        except ValueError as exc:
            raise ValueError(f"--server-args: {exc}") from None
        for field, flag in (("model", "--model"), ("strategy", "--strategies")):
            if getattr(spec, field) is not None:
                raise ValueError(f"--server-args must not set --{field}; {flag} says it")
        return replace(spec, model=self.model, strategy=None if workload.classic else self.strategy)

    def launch_spec(self, workload: WorkloadSpec, cpus: CpuPlan):
        """The launcher's spec, placed on the CPU plan's cores (None for a url target)."""
        if self.kind == "reference":
            return cpus.place(self.reference_spec(workload))
        if self.kind == "command":
            prefix = taskset_prefix(cpus.engine or cpus.server)
            return CommandSpec((*prefix, *shlex.split(self.command)), ready_path=self.ready_path)
        return None

    def describe(self) -> str:
        if self.kind == "reference":
            return " ".join(["reference server", self.model, *([self.strategy] if self.strategy else []),
                             *([self.server_args] if self.server_args else [])])
        return self.command if self.kind == "command" else self.url


@dataclass
class LiveTarget:
    """A target ready for load."""

    spec: TargetSpec
    url: str
    model: str
    pid: int | None = None
    process: ServerProcess | None = None
    grpc_target: str | None = None
    ready_s: float | None = None
    info: ArmInfo | None = None

    @property
    def key(self) -> str | None:
        return self.spec.key


def served_model(url: str, spec: TargetSpec, workload: WorkloadSpec) -> str:
    """The model name to send: the one given, the reference server's classic model, else the target's
    first GET /v1/models id, else the reference preset's name."""
    if spec.served_model:
        return spec.served_model
    if workload.classic:
        return CLASSIC_MODEL[workload.scenario]
    try:
        return requests.get(url + "/v1/models", timeout=10).json()["data"][0]["id"]
    except (requests.RequestException, ValueError, KeyError, IndexError, TypeError):
        return spec.model


def engine_description(url: str) -> dict | None:
    """GET /v1/engine of a reference server (None elsewhere)."""
    try:
        reply = requests.get(url + "/v1/engine", timeout=10)
        body = reply.json() if reply.status_code == 200 else None
    except (requests.RequestException, ValueError):
        return None
    return body if isinstance(body, dict) else None


def check_url(spec: TargetSpec) -> None:
    """An endpoint already running must answer its --ready-path, when one is given."""
    if spec.ready_path is None:
        return
    try:
        status = requests.get(spec.url.rstrip("/") + spec.ready_path, timeout=10).status_code
    except requests.RequestException as exc:
        raise ServerStartError(f"{spec.url}: not reachable ({exc})") from None
    if status != 200:
        raise ServerStartError(f"{spec.url}: GET {spec.ready_path} answered {status}, not 200")


@contextlib.contextmanager
def start(spec: TargetSpec, workload: WorkloadSpec, cpus: CpuPlan, log_path: Path,
          startup_timeout_s: float, launch=None):
    """The target, ready (started, or checked when it is an endpoint already running); stopped on exit.
    `launch`: its launch spec, when the caller built it (placed) already."""
    if spec.kind == "url":
        check_url(spec)
        url = spec.url.rstrip("/")
        model = served_model(url, spec, workload)
        info = ArmInfo(kind="url", url=url, model=model, engine=engine_description(url),
                       serving_engine=describe_external(url).engine)
        yield LiveTarget(spec, url, model, grpc_target=spec.grpc_target, info=info)
        return
    launch = launch or spec.launch_spec(workload, cpus)
    server = ServerProcess(launch, log_path=log_path, startup_timeout_s=startup_timeout_s)
    with server:
        url = server.base_url
        model = served_model(url, spec, workload)
        info = (ArmInfo(kind="reference_server", args=launch.serve_args()) if spec.kind == "reference"
                else ArmInfo(kind="command", command=server.command))
        info = replace(info, url=url, model=model, pid=server.pid, engine=engine_description(url),
                       serving_engine=describe_external(url).engine)
        yield LiveTarget(spec, url, model, server.pid, server, server.grpc_target or spec.grpc_target,
                         server.ready_s, info)


# -- the options -----------------------------------------------------------------------------
@dataclass(frozen=True)
class TargetOptions:
    """The target options as given (contract.options: one schema for the command line and config files);
    `target` and `strategy_names` turn them into targets."""

    url: str | None = option(None, help="an endpoint already running (vLLM, SGLang, TGI, ...): observed, never "
                                         "started")
    server_cmd: str | None = option(None, metavar="CMD",
                                    help="start any engine: a command with {port} where its port goes, e.g. \"vllm "
                                         "serve ./ckpt --port {port}\"; ready when GET --ready-path answers 200")
    ready_path: str | None = option(None, help=f"--server-cmd: polled until it answers 200 (default: {READY_HELP}); "
                                               "--url: checked once before the load")
    model: str = option(DEFAULT_MODEL, help=f"reference server: a preset, a catalog model with --emulate, or a "
                                            f"checkpoint (default {DEFAULT_MODEL})")
    strategies: str = option("continuous", help="reference server: batching strategies, one server each "
                                                "(continuous, static, dynamic, none, ...)")
    server_args: str = option("", help='more `servecap serve` flags, e.g. "--max-num-seqs 16"')
    emulate: str | None = option(None, metavar="GPU",
                                 help="the reference server as an emulated GPU replica (`servecap serve --emulate`): "
                                      "the real engine core at that GPU's step times and KV room, e.g. h100-sxm with "
                                      "--model llama-3.1-8b (EMULATED: no forward pass on a GPU)")
    grpc_target: str | None = option(None, metavar="HOST:PORT",
                                     help="classify over gRPC with --url: the server's KServe V2 gRPC address "
                                          "(default: --url's host, port 8001)")
    served_model: str | None = option(None, metavar="NAME",
                                      help="the model name sent in requests (default: the target's first GET "
                                           "/v1/models id; classify and embed: the reference server's tabular-mlp "
                                           "or servecap-embed)")

    @classmethod
    def from_args(cls, args: Any) -> "TargetOptions":
        return cls(**options_from_args(cls, args))

    def target(self, key: str | None = None, strategy: str | None = None) -> TargetSpec:
        """The one target these options name (a reference server: with this strategy)."""
        given = [flag for flag, value in (("--url", self.url), ("--server-cmd", self.server_cmd)) if value]
        if len(given) > 1:
            raise ValueError("give one target: --url (an endpoint already running) or --server-cmd (a command to "
                             "start), or neither (the reference server)")
        server_args = self.server_args
        if self.emulate:
            server_args = f"{server_args} --emulate {shlex.quote(self.emulate)}".strip()
        if self.url:
            if server_args:
                raise ValueError("--server-args and --emulate start a reference server: not with --url")
            return TargetSpec("url", key, url=self.url, ready_path=self.ready_path, served_model=self.served_model,
                              grpc_target=self.grpc_target)
        if self.grpc_target:
            raise ValueError("--grpc-target names an external server's gRPC port: it needs --url (a reference "
                             "server names its own)")
        if self.server_cmd:
            if server_args:
                raise ValueError("--server-args and --emulate are reference-server flags: put the engine's own "
                                 "flags in --server-cmd")
            return TargetSpec("command", key, command=self.server_cmd, ready_path=self.ready_path,
                              served_model=self.served_model)
        if self.ready_path:
            raise ValueError("--ready-path is for --server-cmd or --url (the reference server says when it is ready)")
        return TargetSpec("reference", key, model=self.model, strategy=strategy, server_args=server_args,
                          served_model=self.served_model)

    def strategy_names(self) -> tuple[str, ...]:
        """--strategies as a checked tuple (the registry's names, each once)."""
        from engine_core.scheduling.strategies import STRATEGIES

        strategies = tuple(s.strip() for s in str(self.strategies).split(",") if s.strip())
        unknown = [s for s in strategies if s not in STRATEGIES]
        if unknown or not strategies:
            raise ValueError(f"--strategies: unknown {', '.join(unknown) or '(empty)'}; choose from "
                             f"{', '.join(STRATEGIES)}")
        if len(set(strategies)) != len(strategies):
            raise ValueError("--strategies lists a strategy twice")
        return strategies


TARGET_OPTIONS = ("url", "server-cmd", "ready-path", "model", "strategies", "server-args", "emulate", "grpc-target",
                  "served-model")


def add_target_arguments(parser: Any, *, title: str = "target", strategies: bool = True) -> None:
    """The target options, once for every command that starts or observes a server."""
    only = TARGET_OPTIONS if strategies else tuple(name for name in TARGET_OPTIONS if name != "strategies")
    add_options(parser, TargetOptions, title=title, only=only)


def target_from_args(args: Any, key: str | None = None, strategy: str | None = None) -> TargetSpec:
    """The one target the options name (a reference server: with this strategy)."""
    return TargetOptions.from_args(args).target(key, strategy)


def strategies_from_args(args: Any) -> tuple[str, ...]:
    return TargetOptions.from_args(args).strategy_names()
