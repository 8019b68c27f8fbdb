"""run.json of one sweep, kept current while it runs so a killed sweep still describes itself.

The sections are the contract's (contract.run_json); each method here changes
one of them and rewrites the file (atomically: a reader never sees half a file).
"""

from __future__ import annotations

import time
from pathlib import Path

from loadgen.observe.run_metadata import git_commit, host_info, versions
from servecap.sweep.external import UNKNOWN, ExternalEngine
from servecap.sweep.config import SweepConfig
from servecap.sweep.level_stats import LevelStats
from contract.run_json import (AutoResult, CpuPinning, LevelEntry, LoadPlan, ObserverInfo, RunInfo,
                                        Seeds, Server, Target, Workload, write_run_json)


def run_info_for(name: str, config: SweepConfig) -> RunInfo:
    """What a sweep with this config is about to run. An external --url's model, strategy and dtype are
    "unknown" until it tells (`record_external`): nothing of the reference server's is assumed for it."""
    if config.url:
        server = Server(model=UNKNOWN, strategy=UNKNOWN, dtype=UNKNOWN, model_config=config.model_config)
    else:
        server = Server(model=config.model, strategies=list(config.strategies), args=config.server_args,
                        model_config=config.model_config)
    return RunInfo(
        name=name, status="running", started_at=time.time(),
        target=Target(kind="url", url=config.url) if config.url else Target(kind="reference_server"),
        server=server,
        load_plan=LoadPlan(kind="auto" if config.auto else "trace" if config.trace else ("open" if config.open_loop else "closed"),
                           concurrency=list(config.concurrency), rates=list(config.rates),
                           arrival="trace" if config.trace else config.arrival if config.open_loop else "closed",
                           trace=str(Path(config.trace).resolve()) if config.trace else None,
                           trace_speedup=config.trace_speedup if config.trace else None,
                           warmup_s=config.warmup_s, duration_s=config.duration_s,
                           rounds=config.rounds if config.rounds > 1 else None,
                           round_warmup_s=config.round_window(1)[0] if config.rounds > 1 else None),
        workload=workload_for(config),
        slo=config.slo, seeds=Seeds(workload=config.seed),
        host=host_info(), versions=versions(), git_commit=git_commit(),
    )


def workload_for(config: SweepConfig) -> Workload:
    """run.json's `workload`: what each request is made of."""
    if config.scenario == "classify":
        return Workload(api="classify", stream=False, rows=config.rows, protocol=config.protocol,
                        classic_model=config.model_name)
    if config.scenario == "embed":
        return Workload(api="embed", stream=False, rows=config.rows, prompt_tokens=config.prompt_tokens,
                        protocol="rest", classic_model=config.model_name)
    return Workload(api="chat", stream=True, ignore_eos=True,
                    prompt_tokens=None if config.dataset else config.prompt_tokens,
                    output_tokens=config.output_tokens,   # None with a dataset: the data's own lengths
                    dataset=str(Path(config.dataset).resolve()) if config.dataset else None,
                    dataset_sampling=config.dataset_sampling if config.dataset else None,
                    turns="all" if config.turns is None else config.turns,
                    think_time_s=config.think_time_s if config.turns != 1 else None,
                    model_mix=config.model_mix, reasoning_tokens=config.reasoning_tokens)


class RunJson:
    """The run.json of one run directory; `info.levels` holds one entry per planned level, in plan order."""

    def __init__(self, out_dir: Path, config: SweepConfig) -> None:
        self.path = out_dir / "run.json"
        self.info = run_info_for(out_dir.name, config)

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
