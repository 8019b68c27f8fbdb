"""Experiments from `servecap sweep`'s own flags, and the Locust command one of their levels would run."""

from __future__ import annotations

from pathlib import Path

from servecap.experiment.locust import level_invocation
from servecap.experiment.profiles import Level
from servecap.experiment.spec import Experiment
from servecap.sweep.cli import build_parser, experiment_from_args


def experiment(*flags: str, out: str = "runs/x") -> Experiment:
    """The experiment `servecap sweep --out OUT FLAGS` would run (nothing starts)."""
    return experiment_from_args(build_parser().parse_args(["--out", out, *flags]))


def command(exp: Experiment, level_id: str, load: float, warmup: float | None = None, duration: float | None = None,
            url: str = "http://127.0.0.1:1", records: str | Path = "r.jsonl", model: str | None = None,
            prefix: tuple[str, ...] = (), worker_cpus: tuple[int, ...] | None = None, grpc_target: str | None = None,
            round: int | None = None) -> list[str]:
    """The `locust` argv of one level (its window: warmup and duration when given, else the plan's)."""
    open_loop = exp.open_loop
    window = (warmup, duration) if warmup is not None else None
    level = Level(load, open_loop=open_loop, round=round, window=window, trace=bool(exp.workload.trace))
    return level_invocation(exp, level, level_id, url, Path(records), model=model, grpc_target=grpc_target,
                            worker_cpus=worker_cpus, prefix=prefix).argv()


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None
