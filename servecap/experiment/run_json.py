"""run.json of one run, kept current while it runs so a killed run still describes itself.

The sections are the contract's (contract.run_json); each method here changes
one of them and rewrites the file (atomically: a reader never sees half a file).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from loadgen.observe.run_metadata import git_commit, host_info, versions
from servecap.experiment.external import UNKNOWN, ExternalEngine
from servecap.experiment.level_stats import LevelStats
from servecap.experiment.spec import Experiment
from contract.run_json import (AutoResult, CpuPinning, LevelEntry, LoadPlan, ObserverInfo, RunInfo,
                               Seeds, Server, Target, write_run_json)


def run_info_for(name: str, experiment: Experiment, command: str | None = None,
                 config: dict[str, Any] | None = None) -> RunInfo:
    """What this experiment is about to run. An external target's model, strategy and dtype are
    "unknown" until it tells (`record_external`): nothing of the reference server's is assumed for it."""
    first = experiment.targets[0]
    load, workload = experiment.load, experiment.workload
    if first.external:
        server = Server(model=UNKNOWN, strategy=UNKNOWN, dtype=UNKNOWN, model_config=experiment.options.model_config)
    else:
        server = Server(model=first.model, strategies=[t.key for t in experiment.targets if t.key],
                        args=first.server_args, model_config=experiment.options.model_config)
    server.served_model = first.served_model
    target = {"url": Target(kind="url", url=first.url), "command": Target(kind="command"),
              "reference": Target(kind="reference_server")}[first.kind]
    kind = ("trace" if workload.trace else "auto" if load.auto else "rate_sweep" if load.rate_sweep
            else "open" if load.rates else "closed")
    files = {name: str(Path(getattr(workload, name)).resolve()) for name in ("dataset", "trace")
             if getattr(workload, name)}
    return RunInfo(
        name=name, status="running", started_at=time.time(), target=target, server=server,
        load_plan=LoadPlan(kind=kind, concurrency=list(load.concurrency), rates=list(load.rates),
                           arrival="trace" if workload.trace else load.arrival if experiment.open_loop else "closed",
                           trace=files.get("trace"), trace_speedup=workload.trace_speedup if workload.trace else None,
                           warmup_s=load.warmup_s, duration_s=load.duration_s,
                           rounds=load.rounds if load.rounds > 1 else None,
                           round_warmup_s=load.round_window(1)[0] if load.rounds > 1 else None),
        workload=workload_for(experiment), slo=experiment.slo, seeds=Seeds(workload=workload.seed),
        host=host_info(), versions=versions(), git_commit=git_commit(), command=command, config=config,
    )


def workload_for(experiment: Experiment):
    """run.json's `workload`: the experiment's, its files as absolute paths."""
    workload = experiment.workload
    return replace(workload, **{name: str(Path(getattr(workload, name)).resolve()) for name in ("dataset", "trace")
                                if getattr(workload, name)})


class RunJson:
    """The run.json of one run directory; `info.levels` holds one entry per planned level, in plan order."""

    def __init__(self, out_dir: Path, experiment: Experiment, command: str | None = None,
                 config: dict[str, Any] | None = None) -> None:
        self.path = out_dir / "run.json"
        self.info = run_info_for(out_dir.name, experiment, command, config)

    def write(self) -> None:
        write_run_json(self.path, self.info)

    # -- the target --------------------------------------------------------------------------
    def record_cpu_pinning(self, pinning: CpuPinning) -> None:
        self.info.cpu_pinning = pinning
        self.write()

    def record_command(self, strategy: str, args: list[str]) -> None:
        self.info.server.record_command(strategy, args)
        self.write()

    def record_engine(self, strategy: str, description: dict) -> None:
        self.info.server.record_engine(strategy, description)
        self.write()

    def record_ready(self, strategy: str, seconds: float) -> None:
        self.info.server.record_ready(strategy, seconds)
        self.write()

    def record_target_command(self, command: list[str]) -> None:
        """A started engine's command ({port} filled in)."""
        self.info.target.command = list(command)
        self.write()

    def record_external(self, described: ExternalEngine) -> None:
        """What an external target told about itself; the rest stays "unknown" or null."""
        server = self.info.server
        server.serving_engine, server.model_root = described.engine, described.model_root
        server.model = described.model or UNKNOWN
        server.dtype = described.dtype or UNKNOWN
        server.max_model_len, server.block_size, server.kv_blocks = (described.max_model_len, described.block_size,
                                                                     described.kv_blocks)
        server.kv_cache_dtype, server.kv_cache_memory_bytes = described.kv_cache_dtype, described.kv_cache_memory_bytes
        server.kv_capacity_tokens = described.kv_capacity_tokens
        self.info.notes.extend(described.notes)
        self.write()

    def record_observers(self, key: str, observers: ObserverInfo) -> None:
        self.info.observers[key] = observers
        self.write()

    def note(self, text: str) -> None:
        self.info.notes.append(text)
        self.write()

    # -- levels ------------------------------------------------------------------------------
    def plan_level(self, level: str, strategy: str | None, load: float) -> LevelEntry:
        entry = LevelEntry(level=level, strategy=strategy, load=load, status="pending")
        self.info.levels.append(entry)
        self.write()
        return entry

    def level_entry(self, level: str) -> LevelEntry | None:
        return self.info.level(level)

    def level_running(self, entry: LevelEntry) -> None:
        entry.status = "running"
        self.write()

    def level_finished(self, entry: LevelEntry, exit_code: int, stats: LevelStats, stable: bool,
                       loadgen: dict | None = None, machine_drift: bool | None = None) -> None:
        """loadgen: the level's entry of requests.meta.json (the generator's own health), when written."""
        entry.status = "ok" if exit_code == 0 else "failed"
        entry.exit_code, entry.requests, entry.errors = exit_code, stats.requests, stats.errors
        entry.throughput_spread, entry.stable = stats.spread, stable
        entry.spread_at_constant_speed, entry.machine_speed_spread = (stats.spread_at_constant_speed,
                                                                      stats.machine_speed_spread)
        entry.served_spread = stats.served_spread
        entry.machine_drift = machine_drift
        entry.rounds = stats.rounds if stats.rounds > 1 else None
        if loadgen:
            entry.loop_lag_p50_s, entry.loop_lag_p99_s, entry.loop_lag_max_s = (
                loadgen.get("loop_lag_p50_s"), loadgen.get("loop_lag_p99_s"), loadgen.get("loop_lag_max_s"))
            entry.limited_by_loadgen = loadgen.get("limited_by_loadgen")
        self.write()

    def record_served_model(self, model: str) -> None:
        self.info.server.served_model = model
        self.write()

    def record_auto(self, key: str, max_concurrency_meeting_slo: int | None, first_failing: int | None) -> None:
        self.info.auto = {**(self.info.auto or {}),
                          key: AutoResult(max_concurrency_meeting_slo=max_concurrency_meeting_slo,
                                          first_failing_concurrency=first_failing)}
        self.write()

    # -- the end -----------------------------------------------------------------------------
    def finish(self, status: str) -> None:
        self.info.status = status
        self.info.ended_at = time.time()
        for entry in self.info.levels:
            if entry.status in ("pending", "running"):
                entry.status = "not run" if entry.status == "pending" else "interrupted"
        self.write()
