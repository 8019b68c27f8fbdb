"""Start (or find) the two arms of a compare run and describe them for run.json.

    args  the reference server with these `servecap serve` flags (+ `--model`), through the launcher:
          --port 0 and its ready line; both arms placed on the same cores.
    cmd   any command serving an OpenAI-compatible API on `{port}`; ready when GET --ready-path is 200;
          pinned, whole, to the server cores (its front end and engine are its own business).
    url   an endpoint already running: checked once on --ready-path, never started or stopped;
          its CPU time cannot be measured (no PID).
"""

from __future__ import annotations

import contextlib
import shlex
from dataclasses import dataclass, replace
from pathlib import Path

import requests

from servecap.compare.config import ArmSpec, CompareConfig
from servecap.sweep.external import describe_external
from servecap.sweep.cpu_pinning import CpuPlan
from contract.run_json import ArmInfo
from servecap.launch.command import CommandSpec
from servecap.launch.process import ServerProcess, ServerStartError
from servecap.launch.spec import ReferenceServerSpec, taskset_prefix


@dataclass
class LiveArm:
    """One arm, ready for load."""

    spec: ArmSpec
    url: str
    model: str
    pid: int | None
    info: ArmInfo
    process: ServerProcess | None = None


def reference_spec(arm: ArmSpec, model: str) -> ReferenceServerSpec:
    """The arm's reference-server spec (ValueError for a flag the server does not take, or --model/--port)."""
    flags = shlex.split(arm.args or "")
    if any(flag == "--model" or flag.startswith("--model=") for flag in flags):
        raise ValueError(f"--{arm.name}-args: the model comes from --model")
    spec = ReferenceServerSpec.from_flags(["--model", model, *flags])
    return spec


def _models(url: str) -> list[str]:
    try:
        return [entry["id"] for entry in requests.get(url + "/v1/models", timeout=10).json()["data"]]
    except (requests.RequestException, ValueError, KeyError, TypeError):
        return []


def _engine(url: str) -> dict | None:
    try:
        reply = requests.get(url + "/v1/engine", timeout=10)
        return reply.json() if reply.status_code == 200 else None
    except (requests.RequestException, ValueError):
        return None


def check_url(arm: ArmSpec, ready_path: str) -> None:
    try:
        status = requests.get(arm.url.rstrip("/") + ready_path, timeout=10).status_code
    except requests.RequestException as exc:
        raise ServerStartError(f"--{arm.name}-url {arm.url}: not reachable ({exc})") from None
    if status != 200:
        raise ServerStartError(f"--{arm.name}-url {arm.url}: GET {ready_path} answered {status}, not 200")


class Arms(contextlib.AbstractContextManager):
    """Both arms: started in order A then B, stopped (drained) on exit."""

    def __init__(self, config: CompareConfig, cpus: CpuPlan, out_dir: Path) -> None:
        self.config, self.cpus, self.out_dir = config, cpus, out_dir
        self.live: dict[str, LiveArm] = {}
        # every spec is built (and refused, with a message) before anything starts
        self._specs = {arm.name: self._spec(arm) for arm in (config.a, config.b) if arm.kind != "url"}

    def _spec(self, arm: ArmSpec):
        if arm.kind == "args":
            return self.cpus.place(reference_spec(arm, self.config.model))
        prefix = taskset_prefix(self.cpus.engine or self.cpus.server)
        try:
            return CommandSpec((*prefix, *shlex.split(arm.cmd)), ready_path=self.config.ready_path)
        except ValueError as exc:
            raise ValueError(f"--{arm.name}-cmd: {exc}") from None

    def __enter__(self) -> "Arms":
        try:
            for arm in (self.config.a, self.config.b):
                self.live[arm.name] = self._start(arm)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        for live in self.live.values():
            if live.process is not None:
                live.process.stop()

    def _start(self, arm: ArmSpec) -> LiveArm:
        config, log = self.config, self.out_dir / f"server-{arm.name}.log"
        if arm.kind == "url":
            check_url(arm, config.ready_path)
            url = arm.url.rstrip("/")
            model = self._model(url)
            return LiveArm(arm, url, model, None, ArmInfo(kind="url", url=url, model=model, engine=_engine(url),
                                                          serving_engine=describe_external(url).engine))
        spec = self._specs[arm.name]
        info = (ArmInfo(kind="reference_server", args=spec.serve_args()) if arm.kind == "args"
                else ArmInfo(kind="command"))
        process = ServerProcess(spec, log_path=log, startup_timeout_s=config.startup_timeout_s).start()
        url = process.base_url
        if arm.kind == "cmd":
            info = replace(info, command=process.command)
        model = self._model(url)
        info = replace(info, url=url, model=model, pid=process.pid, engine=_engine(url),
                       serving_engine=describe_external(url).engine)
        return LiveArm(arm, url, model, process.pid, info, process)

    def _model(self, url: str) -> str:
        models = _models(url)
        return models[0] if models else self.config.model
