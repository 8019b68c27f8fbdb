"""`servecap sweep`: drive a server through load levels with Locust while samplers record the machine.

For each strategy (reference server) or once (external --url):
  start the server (subprocess) -> wait for GET /ready -> record its engine config ->
  start the device/host sampler and the /metrics scraper -> for each load level run
  `locust -f loadgen/chat.py --headless` (subprocess) appending to requests.jsonl ->
  stop everything.
run.json is rewritten after every step, so a killed sweep leaves a usable partial run.
"""

from __future__ import annotations

import shlex
import signal
from dataclasses import replace
from functools import cached_property
from pathlib import Path

import requests
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from servecap.sweep.external import describe_external
from servecap.sweep.generator_warnings import level_warnings
from servecap.sweep.knee_search import search_knee
from servecap.sweep.level_stats import STABILITY_WINDOWS, LevelStats, level_stats
from servecap.sweep.locust_level import STOP_TIMEOUT_S, LevelPlan, locust_command, run_level, worker_commands
from servecap.sweep.cpu_pinning import plan_cpus
from servecap.sweep.loadgen_priority import LoadgenPriority, choose_priority
from contract.level_windows import serpentine
from loadgen.observe.observers import Observers
from reports.diagnostics.canary_speed import steal_by_core, stolen_text
from contract.canary import CANARY_FILE
from contract.engine_record import STEPS_FILE
from contract.loadgen_meta import read_meta
from contract.records import RECORDS_FILE, Record, refuse_existing_run
from contract.run_json import CpuPinning
from servecap.sweep.run_json import RunJson
from servecap.sweep.config import SweepConfig
from servecap.sweep.prediction_probe import probe_predictions
from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec


def reference_server_spec(config: SweepConfig, target: str | None = None) -> ReferenceServerSpec:
    """The reference server the sweep starts (per strategy, or per --server-args-matrix entry): --model plus
    the user's --server-args (and the entry's), parsed once by the server's own parser; ValueError, before
    anything starts, for a flag it would not take."""
    flags = shlex.split(config.target_args(target) if target is not None else config.server_args)
    if config.scenario == "classify" and config.protocol == "grpc" and "--grpc-port" not in flags:
        flags += ["--grpc-port", "0"]   # its ready line names the port
    if config.scenario != "chat" and "--engine-mode" not in flags:
        # a classic model runs in the serving process: the idle LLM engine stays a thread there, so the
        # CPU plan gives that process the cores an engine process would have had
        flags += ["--engine-mode", "thread"]
    try:
        spec = ReferenceServerSpec.from_flags(flags)
    except ValueError as exc:
        raise ValueError(f"--server-args: {exc}") from None
    for field, sweep_flag in (("model", "--model"), ("strategy", "--strategies")):
        if getattr(spec, field) is not None:
            raise ValueError(f"--server-args must not set --{field}; the sweep's {sweep_flag} says it")
    return replace(spec, model=config.model)


class SweepInterrupted(Exception):
    """SIGTERM or Ctrl-C: stop cleanly and keep what was recorded."""


def _raise_interrupted(signum, frame):
    raise SweepInterrupted(f"signal {signum}")


class Sweep:
    def __init__(self, config: SweepConfig, console: Console | None = None) -> None:
        self.config = config
        self.console = console or Console(stderr=True)
        self.out = Path(config.out_dir)
        self.records = self.out / RECORDS_FILE
        self.run_json: RunJson | None = None
        self.server_spec = reference_server_spec(config)
        self.target_specs = {target: reference_server_spec(config, target) for target in config.targets}
        self._level_records: dict[str, list[Record]] = {}   # each level's records over its rounds so far
        # what the levels warned of, by kind: said once each, at the end (`grouped_warnings`)
        self.warnings: dict[str, list[str]] = {}
        self._said: set[str] = set()   # notes printed once a sweep
        self.grpc_target = config.grpc_target   # classify over gRPC: the server's HOST:PORT (a started one's, once up)
        self.cpus = plan_cpus(config.pin_cpus, external_server=config.url is not None,
                              loadgen_processes=config.loadgen_processes,
                              engine_process=self.server_spec.engine_process)

    @cached_property
    def loadgen_priority(self) -> LoadgenPriority:
        """Chosen when the run starts (it starts `chrt` once to see whether real time is allowed)."""
        return choose_priority(self.config.loadgen_priority)

    # -- the whole run ------------------------------------------------------------------
    def run(self) -> Path:
        refuse_existing_run(self.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.run_json = RunJson(self.out, self.config)
        self.run_json.record_cpu_pinning(CpuPinning.from_dict({
            **self.cpus.describe(), "loadgen_nice": self.loadgen_priority.niceness,
            "loadgen_priority": self.loadgen_priority.describe()}))
        previous = signal.signal(signal.SIGTERM, _raise_interrupted)
        status = "failed"
        try:
            targets = [None] if self.config.url else list(self.config.targets)
            if not self.config.auto:  # the whole plan up front: a killed sweep names what it never ran
                for strategy in targets:
                    for load in self.config.loads:
                        self.run_json.plan_level(self.config.level_id(strategy, load), strategy, load)
            with self.cpus.orchestrator_on_loadgen_cores():
                for strategy in targets:
                    self._run_target(strategy)
            status = "complete"
        except (SweepInterrupted, KeyboardInterrupt):
            status = "interrupted"
            self.console.print("[yellow]sweep interrupted: keeping what was recorded[/]")
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.run_json.finish(status)
        return self.out

    def _run_target(self, strategy: str | None) -> None:
        config = self.config
        if strategy is None:
            described = describe_external(config.url)
            self.run_json.record_external(described)
            self.console.print(f"target {config.url}: engine {described.engine or 'unknown'}, model "
                               f"{described.model or 'unknown'}" + (f", {described.kv_blocks} KV blocks of "
                                                                    f"{described.block_size} tokens"
                                                                    if described.kv_blocks else ""))
            self._observe(config.url, server_pid=None, strategy=None, model=described.model or config.model)
            return
        classic = config.scenario != "chat"   # a classic model: the LLM strategy stays the server's default
        spec = self.cpus.place(replace(self.target_specs[strategy], strategy=None if classic else strategy))
        self.run_json.record_command(strategy, spec.serve_args())
        server = ServerProcess(spec, log_path=self.out / f"server-{strategy}.log",
                               startup_timeout_s=config.startup_timeout_s)
        self.console.print(f"starting reference server: {strategy} ({config.model})")
        with server:
            self.grpc_target = server.grpc_target
            self.run_json.record_ready(strategy, server.ready_s)
            self._record_engine(server.base_url, strategy)
            self._observe(server.base_url, server_pid=server.pid, strategy=strategy)
            if config.scenario == "classify":   # the same seeded rows through this configuration: the report compares them
                try:
                    probe_predictions(server.base_url, config.model_name, config.seed, self.out, strategy)
                except (requests.RequestException, ValueError, KeyError, IndexError) as exc:
                    self.run_json.note(f"{strategy}: the prediction probe failed ({exc}); no predictions to compare")

    def _record_engine(self, url: str, strategy: str) -> None:
        """The live engine's own description (KV blocks, this strategy's limits) goes into run.json's
        `server.engines[strategy]`."""
        try:
            engine = requests.get(url + "/v1/engine", timeout=10).json()
        except (requests.RequestException, ValueError) as exc:
            self.run_json.note(f"{strategy}: GET /v1/engine failed ({exc}); engine config not recorded")
            return
        if not isinstance(engine, dict):
            self.run_json.note(f"{strategy}: GET /v1/engine gave no JSON object; engine config not recorded")
            return
        self.run_json.record_engine(strategy, engine)

    def _observe(self, url: str, server_pid: int | None, strategy: str | None, model: str | None = None) -> None:
        key = strategy or "url"
        observers = Observers(self.out, self.config.sample_interval_s, server_pid, url, source=key,
                              server=self.config.observe_server,
                              canary=self.config.diagnostics)
        described = observers.start()
        self.run_json.record_observers(key, described)
        if described.sampler_note and described.sampler_note not in self._said:   # once a sweep, not a server
            self._said.add(described.sampler_note)
            self.console.print(described.sampler_note, style="yellow", markup=False, highlight=False)
        try:
            if self.config.auto:
                self._auto(url, strategy, model)
            else:
                for round_index in range(self.config.rounds):
                    for load in serpentine(self.config.loads, round_index):
                        self._level(url, strategy, load, model, round_index)
        finally:
            self.run_json.record_observers(key, observers.stop())

    # -- one level ------------------------------------------------------------------------
    def _level(self, url: str, strategy: str | None, load: float, model: str | None,
               round_index: int = 0) -> LevelStats:
        config = self.config
        level = config.level_id(strategy, load)
        entry = self.run_json.level_entry(level) or self.run_json.plan_level(level, strategy, load)
        in_rounds = config.rounds > 1
        plan = LevelPlan(level, load, *config.round_window(round_index), round=round_index if in_rounds else None)
        prefix = [*self.loadgen_priority.prefix, *self.cpus.prefix(self.cpus.loadgen)]
        command = locust_command(config, plan, url, self.records, model, prefix, self.cpus.loadgen,
                                 grpc_target=self.grpc_target)
        planned_s = plan.warmup_s + plan.duration_s
        timeout = planned_s + STOP_TIMEOUT_S + 120
        if config.loadgen_external_workers:   # the master first waits for its workers to join
            timeout += config.loadgen_worker_wait_s
        self.run_json.level_running(entry)
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TimeElapsedColumn(),
                      TextColumn("{task.fields[stats]}"), console=self.console, transient=False) as progress:
            label = f"{level} round {round_index + 1}/{config.rounds}" if in_rounds else level
            task = progress.add_task(label, total=planned_s, stats="starting locust")

            earlier = self._level_records.get(level, [])

            def on_progress(records: list[Record]) -> None:
                stats = level_stats(earlier + records, level)
                p99 = f"{stats.p99_e2e_s * 1000:.0f} ms" if stats.p99_e2e_s is not None else "-"
                progress.update(task, completed=min(planned_s, progress.tasks[task].elapsed or 0),
                                stats=f"{len(records)} req  p99 e2e {p99}  errors {stats.errors}")

            code, records = run_level(command, self.records, self.out / "locust.log", timeout, on_progress,
                                      worker_commands(config, prefix))
            progress.update(task, completed=planned_s)
        records = self._level_records[level] = earlier + records   # every round of the level so far
        # --diagnostics: stability at the machine's usual speed, from the engine's own steps
        stats = level_stats(records, level, self._engine_steps(strategy or "url") if config.diagnostics else None)
        loadgen = self._loadgen_meta(level)   # over the level's rounds so far (the report reads every round's)
        judged = round_index == config.rounds - 1   # in rounds: judged once, over all of them
        if judged:
            for text in level_warnings(loadgen.get("warnings") or [], config.rounds):
                self._warn("load generator", f"{level}: {text}")
        stable = stats.is_stable(config.stability_tolerance)
        drift = stats.machine_drift(config.stability_tolerance)
        self.run_json.level_finished(entry, code, stats, stable, loadgen, drift)
        if code != 0:
            self.console.print(f"[red]{level}: locust exited {code}; see {self.out / 'locust.log'}[/]")
        elif judged and not stable:
            spread = stats.judged_spread
            spread = f"{spread:.0%}" if spread is not None else "unknown"
            what = "throughput"
            if stats.window_offered is not None:
                what = "tokens served over tokens arrived"
            elif stats.speed_index is not None:
                spread += " at constant machine speed"
            windows = "sub-windows" if stats.rounds == 1 else (
                "rounds" if stats.rounds <= STABILITY_WINDOWS else f"{STABILITY_WINDOWS} groups of its {stats.rounds} rounds")
            self._warn(f"{what} not stable across {windows} (a longer --duration fixes it)",
                       f"{level} (spread {spread}{self._host_steal(stats)})")
        elif judged and drift:
            self._warn("the machine's own speed varied while the server was steady (the engine's steps, same "
                       "batch shapes)", f"{level} (machine {stats.machine_speed_spread:.0%}, server "
                       f"{stats.spread_at_constant_speed:.0%} at constant speed, {stats.spread:.0%} raw)")
        return stats

    def _warn(self, kind: str, item: str) -> None:
        self.warnings.setdefault(kind, []).append(item)

    def grouped_warnings(self) -> list[str]:
        """Each kind of warning once, its levels on one line (run.json and the report keep the detail)."""
        return [f"warning: {kind}: {'; '.join(items)}" for kind, items in self.warnings.items()]

    def _engine_steps(self, source: str):
        """This server's rows of engine_steps.csv so far (None when it keeps no engine record)."""
        import pandas as pd

        path = self.out / STEPS_FILE
        try:
            steps = pd.read_csv(path, usecols=["source", "t_start", "step_s", "batch", "prefill_tokens",
                                               "context_tokens"])
        except (OSError, ValueError, pd.errors.EmptyDataError):
            return None
        return steps[steps["source"].astype(str) == source]

    def _host_steal(self, stats: LevelStats) -> str:
        """", the VM's host took 22% of core 0" when the canary saw it take more than HOST_STEAL_WARN of a core."""
        import pandas as pd

        try:
            canary = pd.read_csv(self.out / CANARY_FILE)
        except (OSError, ValueError, pd.errors.EmptyDataError):
            return ""
        text = stolen_text(steal_by_core(canary, stats.spans))
        return f", while the VM's host took {text}" if text else ""

    def _loadgen_meta(self, level: str) -> dict:
        """The generator's own health for this level (requests.meta.json; {} when it wrote none)."""
        try:
            return (read_meta(self.records).get("levels") or {}).get(level) or {}
        except (OSError, ValueError):
            return {}

    # -- --auto: ramp until the SLO breaks, then bisect ------------------------------------
    def _auto(self, url: str, strategy: str | None, model: str | None) -> None:
        def meets(load: int) -> bool:
            check = self._level(url, strategy, load, model).check(self.config.slo)
            if not check.meets:
                self.console.print(f"{self.config.level_id(strategy, load)} misses the SLO: {check.reason}")
            return check.meets

        found = search_knee(meets, self.config.auto_max_concurrency)
        key = strategy or "url"
        self.run_json.record_auto(key, found.max_meeting_slo, found.first_failing)
        self.console.print(f"{key}: highest concurrency meeting the SLO: {found.max_meeting_slo or 'none'}"
                           + (f", first failing: {found.first_failing}" if found.first_failing else ""))
