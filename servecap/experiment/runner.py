"""The one runner every measuring command stands on: an experiment's targets under its load, measured.

For each target in turn (a strategy's reference server, an engine's command, an endpoint):
  start it (subprocess) or check it -> wait until ready -> record what it is (run.json) ->
  start the device/host sampler and the /metrics scraper -> let the load profile pick each level
  from the last one's result, each level one `locust` process tree (servecap.experiment.locust)
  appending to requests.jsonl -> stop everything.
A compare run's profile takes both targets at once (`run_together`) and sends its slices through
the same Locust builder. run.json is rewritten after every step, so a killed run leaves a usable
partial run; SIGTERM and Ctrl-C stop cleanly and keep what was recorded.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

import requests
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from contract.canary import CANARY_FILE
from contract.engine_record import STEPS_FILE
from contract.loadgen_meta import read_meta
from contract.records import RECORDS_FILE, Record, refuse_existing_run
from contract.run_json import CpuPinning
from loadgen.observe.observers import Observers
from reports.diagnostics.canary_speed import steal_by_core, stolen_text
from servecap.experiment import targets as target_module
from servecap.experiment.cpu_pinning import plan_cpus
from servecap.experiment.external import describe_external, is_router
from servecap.experiment.generator_warnings import level_warnings
from servecap.experiment.level_stats import STABILITY_WINDOWS, LevelStats, level_stats
from servecap.experiment.loadgen_priority import LoadgenPriority, choose_priority
from servecap.experiment.locust import LocustInvocation, level_invocation, run_locust
from servecap.experiment.prediction_probe import probe_predictions
from servecap.experiment.profiles import Level, ProfileOutcome, drive
from servecap.experiment.run_json import RunJson
from servecap.experiment.spec import Experiment
from servecap.experiment.targets import LiveTarget, TargetSpec


class RunInterrupted(Exception):
    """SIGTERM or Ctrl-C: stop cleanly and keep what was recorded."""


def _raise_interrupted(signum, frame):
    raise RunInterrupted(f"signal {signum}")


class Runner:
    """Runs one experiment into its run directory (`run`, or `run_together` for a compare run).

    command, config: what started it and every option it was given (run.json's `command` and
    `config`, which `--config run.json` replays)."""

    def __init__(self, experiment: Experiment, console: Console | None = None, *, command: str | None = None,
                 config: dict[str, Any] | None = None, observe: bool = True) -> None:
        self.experiment = experiment
        self.console = console or Console(stderr=True)
        self.out = Path(experiment.out_dir)
        self.records = self.out / RECORDS_FILE
        self.command, self.config, self.observe = command, config, observe
        self.run_json: RunJson | None = None
        self.status = "failed"
        options = experiment.options
        workload = experiment.workload
        # every target's launch spec is built, and refused with a message, before anything starts
        reference = [t for t in experiment.targets if t.kind == "reference"]
        engine_process = reference[0].reference_spec(workload).engine_process if reference else True
        self.cpus = plan_cpus(options.pin_cpus, external_server=not reference,
                              loadgen_processes=options.loadgen_processes, engine_process=engine_process)
        self.launch = {t.key: t.launch_spec(workload, self.cpus) for t in experiment.targets}
        self._level_records: dict[str, list[Record]] = {}   # each level's records over its rounds so far
        # what the levels warned of, by kind: said once each, at the end (`grouped_warnings`)
        self.warnings: dict[str, list[str]] = {}
        self._said: set[str] = set()   # notes printed once a run
        self.outcomes: dict[str | None, ProfileOutcome | None] = {}
        self.results: dict[str, LevelStats] = {}   # level id -> its quick figures over all its rounds so far

    @property
    def failed_levels(self) -> list[tuple[str, int]]:
        """(level, load generator's exit code) of every level whose generator did not run to the end."""
        if self.run_json is None:
            return []
        return [(entry.level, entry.exit_code) for entry in self.run_json.info.levels if entry.status == "failed"]

    @cached_property
    def loadgen_priority(self) -> LoadgenPriority:
        """Chosen when the run starts (it starts `chrt` once to see whether real time is allowed)."""
        return choose_priority(self.experiment.options.loadgen_priority)

    # -- the whole run ------------------------------------------------------------------
    @contextlib.contextmanager
    def _running(self):
        refuse_existing_run(self.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.run_json = RunJson(self.out, self.experiment, self.command, self.config)
        self.run_json.record_cpu_pinning(CpuPinning.from_dict({
            **self.cpus.describe(), "loadgen_nice": self.loadgen_priority.niceness,
            "loadgen_priority": self.loadgen_priority.describe()}))
        previous = signal.signal(signal.SIGTERM, _raise_interrupted)
        self.status = "failed"
        try:
            with self.cpus.orchestrator_on_loadgen_cores():
                yield
            self.status = "complete"
        except (RunInterrupted, KeyboardInterrupt):
            self.status = "interrupted"
            self.console.print("[yellow]interrupted: keeping what was recorded[/]")
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.run_json.finish(self.status)

    def run(self, profile=None) -> Path:
        """Each target in turn under `profile` (default: the one the load options name)."""
        experiment = self.experiment
        profile = profile or experiment.profile()
        with self._running():
            for target in experiment.targets:   # the plan up front: a killed run names what it never ran
                for level in profile.planned():
                    self._plan(target.key, level)
            for target in experiment.targets:
                self._run_target(target, profile)
        return self.out

    def run_together(self, drive: Callable[["Runner", dict[str, LiveTarget]], None]) -> Path:
        """Every target started at once, then `drive(runner, {key: live target})` sends the load (a
        compare run's slices, through `invoke`)."""
        with self._running():
            with contextlib.ExitStack() as stack:
                live = {}
                for target in self.experiment.targets:
                    live[target.key] = stack.enter_context(self._started(target))
                    self.console.print(f"{target.key}: {target.describe()}"
                                       + ("" if target.kind == "url" else f" at {live[target.key].url}")
                                       + f" (model {live[target.key].model})")
                drive(self, live)
        return self.out

    # -- one target ---------------------------------------------------------------------
    @contextlib.contextmanager
    def _started(self, target: TargetSpec):
        """The target, ready and described in run.json; stopped (drained) on the way out."""
        experiment, key = self.experiment, target.key
        label = key or ("url" if target.kind == "url" else "command")
        if target.kind != "url":
            self.console.print(f"starting {target.describe()}" + (f" ({label})" if key else ""))
        with target_module.start(target, experiment.workload, self.cpus, self.out / f"server-{label}.log",
                                 experiment.options.startup_timeout_s, self.launch[key]) as live:
            run_json = self.run_json
            if target.kind == "reference":
                run_json.record_command(key, self.launch[key].serve_args())
            if live.ready_s is not None:
                run_json.record_ready(label, live.ready_s)
            if target.kind == "command" and live.process is not None:
                run_json.record_target_command(live.process.command)
            if target.external:
                described = describe_external(live.url)
                run_json.record_external(described)
                self.console.print(f"target {live.url}: engine {described.engine or 'unknown'}, model "
                                   f"{described.model or 'unknown'}" + (f", {described.kv_blocks} KV blocks of "
                                                                        f"{described.block_size} tokens"
                                                                        if described.kv_blocks else ""))
            elif live.info and live.info.engine is not None:
                run_json.record_engine(key, live.info.engine)
            else:
                run_json.note(f"{label}: GET /v1/engine gave no engine description; engine config not recorded")
            run_json.record_served_model(live.model)
            yield live

    def _run_target(self, target: TargetSpec, profile) -> None:
        experiment = self.experiment
        with self._started(target) as live:
            key = target.key or "url"
            observers = None
            if self.observe:
                observe_server = experiment.options.observe_server
                if observe_server and target.external and is_router(live.url):
                    observe_server = False
                    self.run_json.note(f"{key}: {live.url} is vLLM's router: its /metrics and step records are not "
                                       "read through it (each poll would be routed to a worker like a request, "
                                       "moving its round robin and mixing the workers' records)")
                    self.console.print(f"{live.url} is vLLM's router: the workers' /metrics and step records are "
                                       "not read through it", style="yellow", markup=False, highlight=False)
                observers = Observers(self.out, experiment.options.sample_interval_s, live.pid, live.url, source=key,
                                      server=observe_server,
                                      canary=experiment.options.diagnostics)
                described = observers.start()
                self.run_json.record_observers(key, described)
                if described.sampler_note and described.sampler_note not in self._said:   # once a run
                    self._said.add(described.sampler_note)
                    self.console.print(described.sampler_note, style="yellow", markup=False, highlight=False)
            try:
                outcome = self._drive(profile, live)
            finally:
                if observers is not None:
                    self.run_json.record_observers(key, observers.stop())
            self.outcomes[target.key] = outcome
            if outcome is not None and (outcome.max_meeting_slo or outcome.first_failing):
                self.run_json.record_auto(key, outcome.max_meeting_slo, outcome.first_failing)
                self.console.print(f"{key}: highest concurrency meeting the SLO: {outcome.max_meeting_slo or 'none'}"
                                   + (f", first failing: {outcome.first_failing}" if outcome.first_failing else ""))
            for note in outcome.notes if outcome is not None else ():
                self.run_json.note(f"{key}: {note}")
            if experiment.workload.scenario == "classify" and target.kind == "reference":
                # the same seeded rows through this configuration: the report compares them
                try:
                    probe_predictions(live.url, live.model, experiment.workload.seed, self.out, key)
                except (requests.RequestException, ValueError, KeyError, IndexError) as exc:
                    self.run_json.note(f"{key}: the prediction probe failed ({exc}); no predictions to compare")

    def _drive(self, profile, live: LiveTarget) -> ProfileOutcome | None:
        """The profile's levels, each sent what the last measured, until it is done."""
        return drive(profile.steps(), lambda level: self.measure(live, level))

    # -- one level ------------------------------------------------------------------------
    def _plan(self, key: str | None, level: Level):
        level_id = self.experiment.level_id(key, level.load, level.open_loop, level.trace)
        return self.run_json.level_entry(level_id) or self.run_json.plan_level(level_id, key, level.load)

    def measure(self, live: LiveTarget, level: Level) -> LevelStats:
        """One level (or one round of it) against a live target; its quick figures (the report computes
        the published ones)."""
        experiment = self.experiment
        load = experiment.load
        level_id = experiment.level_id(live.key, level.load, level.open_loop, level.trace)
        entry = self._plan(live.key, level)
        rounds = load.rounds if not level.trace else 1
        invocation = level_invocation(experiment, level, level_id, live.url, self.records, model=live.model,
                                      grpc_target=live.grpc_target, worker_cpus=self.cpus.loadgen,
                                      prefix=(*self.loadgen_priority.prefix, *self.cpus.prefix(self.cpus.loadgen)))
        warmup_s, duration_s = invocation.warmup_s, invocation.run_time_s - invocation.warmup_s
        planned_s = warmup_s + duration_s
        self.run_json.level_running(entry)
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TimeElapsedColumn(),
                      TextColumn("{task.fields[stats]}"), console=self.console, transient=False) as progress:
            label = f"{level_id} round {level.round + 1}/{rounds}" if level.round is not None else level_id
            task = progress.add_task(label, total=planned_s, stats="starting locust")
            earlier = self._level_records.get(level_id, [])

            def on_progress(records: list[Record]) -> None:
                stats = level_stats(earlier + records, level_id)
                p99 = f"{stats.p99_e2e_s * 1000:.0f} ms" if stats.p99_e2e_s is not None else "-"
                progress.update(task, completed=min(planned_s, progress.tasks[task].elapsed or 0),
                                stats=f"{len(records)} req  p99 e2e {p99}  errors {stats.errors}")

            code, records = run_locust(invocation, self.out / "locust.log", on_progress)
            progress.update(task, completed=planned_s)
        records = self._level_records[level_id] = earlier + records   # every round of the level so far
        key = live.key or "url"
        # --diagnostics: stability at the machine's usual speed, from the engine's own steps
        stats = level_stats(records, level_id, self._engine_steps(key) if experiment.options.diagnostics else None)
        self.results[level_id] = stats
        loadgen = self._loadgen_meta(level_id)   # over the level's rounds so far (the report reads every round's)
        judged = level.round is None or level.round == rounds - 1   # in rounds: judged once, over all of them
        if judged:
            for text in level_warnings(loadgen.get("warnings") or [], rounds):
                self._warn("load generator", f"{level_id}: {text}")
        tolerance = experiment.options.stability_tolerance
        stable, drift = stats.is_stable(tolerance), stats.machine_drift(tolerance)
        self.run_json.level_finished(entry, code, stats, stable, loadgen, drift)
        if code != 0:
            self.console.print(f"[red]{level_id}: locust exited {code}; see {self.out / 'locust.log'}[/]")
        elif judged and not stable:
            self._unstable(level_id, stats)
        elif judged and drift:
            self._warn("the machine's own speed varied while the server was steady (the engine's steps, same "
                       "batch shapes)", f"{level_id} (machine {stats.machine_speed_spread:.0%}, server "
                       f"{stats.spread_at_constant_speed:.0%} at constant speed, {stats.spread:.0%} raw)")
        return stats

    def invoke(self, invocation: LocustInvocation) -> tuple[int, list[Record]]:
        """A Locust run the caller built (a compare run's slices), into this run's records and log."""
        return run_locust(invocation, self.out / "locust.log")

    def _unstable(self, level_id: str, stats: LevelStats) -> None:
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
                   f"{level_id} (spread {spread}{self._host_steal(stats)})")

    def _warn(self, kind: str, item: str) -> None:
        self.warnings.setdefault(kind, []).append(item)

    def grouped_warnings(self) -> list[str]:
        """Each kind of warning once, its levels on one line (run.json and the report keep the detail)."""
        return [f"warning: {kind}: {'; '.join(items)}" for kind, items in self.warnings.items()]

    def _engine_steps(self, source: str):
        """This server's rows of engine_steps.csv so far (None when it keeps no engine record)."""
        import pandas as pd

        try:
            steps = pd.read_csv(self.out / STEPS_FILE, usecols=["source", "t_start", "step_s", "batch",
                                                                "prefill_tokens", "context_tokens"])
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
