"""Wire a scenario into Locust's events: flags, validation, per-test runs, records; the one user class.

A locustfile calls `install(events, add_arguments, build)` at import and imports
`LoadUser`; the two locustfiles differ only by their scenario. `build(options,
environment, role, settings)` returns the scenario (None for the "check" and "master"
roles, which send nothing, after validating the scenario's own flags) or raises
ValueError naming the bad flag. The common flags become `RunSettings` here. Flags are
validated at `init` (a bad flag exits with code 2 and one line, no traceback) and
again at each `test_start` (the web UI can change them).
"""

from __future__ import annotations

import gc
import logging
import sys
import time
from types import SimpleNamespace
from typing import Any, Callable

import gevent
from locust import User, constant, task

from loadgen.scenario.load_run import DISTRIBUTED_START_S, LoadRun
from loadgen.scenario.route import Scenario
from loadgen.scenario.record_sink import RecordSink
from loadgen.scenario.run_settings import RunSettings
from loadgen.scenario.token_stats import install_token_stats
from loadgen.scenario.token_summary import write_summary
from loadgen.scenario.token_tab import install_token_tab

log = logging.getLogger(__name__)

Build = Callable[[Any, Any, str, RunSettings], Scenario | None]


def _settings_and_scenario(build: Build, options, environment, role: str) -> tuple[RunSettings, Scenario | None]:
    settings = RunSettings.from_options(options)
    return settings, build(options, environment, role, settings)


def install(events, add_arguments: Callable[[Any], None], build: Build) -> None:
    @events.init_command_line_parser.add_listener
    def _add_arguments(parser, **_) -> None:
        add_arguments(parser)

    @events.init.add_listener
    def _on_init(environment, **_) -> None:
        # gevent's loop caches "now" and has not run since before the imports (seconds of
        # blocking work): Locust arms its --run-time timer right after this event, and a
        # stale "now" makes a 2 s test stop after 0.7 s.
        gevent.get_hub().loop.update_now()
        sink = RecordSink(environment)
        tokens = install_token_stats(environment, sink.role)
        environment.servecap = SimpleNamespace(sink=sink, run=None, tokens=tokens)
        if environment.web_ui is not None:
            install_token_tab(environment.web_ui, tokens)
        if sink.role != "worker":
            environment.events.quit.add_listener(lambda **_: write_summary(tokens, environment.parsed_options))
        if environment.parsed_options is not None and sink.role != "worker":
            try:
                _settings_and_scenario(build, environment.parsed_options, environment, "check")
            except ValueError as exc:
                print(f"locust: error: {exc}", file=sys.stderr)
                raise SystemExit(2) from None

    @events.test_start.add_listener
    def _on_test_start(environment, **_) -> None:
        state = environment.servecap
        role = state.sink.role
        options = environment.parsed_options
        if role == "master" and options is not None:
            # travels to workers with the spawn message: one schedule start, one level label
            options.servecap_t0 = time.time() + DISTRIBUTED_START_S
            options.servecap_users = environment.runner.target_user_count
            workers = int(getattr(options, "expect_workers", 1) or 1)
            if getattr(options, "rates", None) and environment.runner.target_user_count < workers:
                log.warning("open loop over %d workers with only %d users: a worker without a user sends "
                            "nothing, so its share of the schedule is lost; use -u >= %d", workers,
                            environment.runner.target_user_count, workers)
        try:
            settings, scenario = _settings_and_scenario(build, options, environment, role)
            if settings.slice_plan is not None and role != "local":
                raise ValueError("--slice-plan runs in one local Locust process, not with --master/--worker")
            run = LoadRun(environment, scenario, settings, state.sink)
            state.sink.begin(run)
            freeze_startup_heap()
            run.start()
        except ValueError as exc:
            log.error("cannot start the test: %s", exc)
            environment.process_exit_code = 2
            gevent.spawn(environment.runner.quit)
            return
        state.run = run

    @events.test_stopping.add_listener
    def _on_test_stopping(environment, **_) -> None:
        run = environment.servecap.run
        if run is not None:   # the loop lag measures the test, not its teardown (killing users, last records)
            run.health.loop_lag.stop()
            run.begin_stop()

    @events.test_stop.add_listener
    def _on_test_stop(environment, **_) -> None:
        run = environment.servecap.run
        if run is not None:
            run.stop()


def freeze_startup_heap() -> None:
    """Move every object alive now (imports, Locust, the scenario) out of the collector's reach, so a
    full collection during the test walks only what the test made. Measured at 16 streams (tiny, 2
    cores): no change in loop lag, because the collector hardly ran (3-5 young collections in 20 s,
    none of the old generations; gc_pauses.py counts them); kept for long runs, where full
    collections over a grown heap would otherwise pause the loop."""
    gc.collect()
    gc.freeze()


def current_run(environment) -> LoadRun | None:
    state = getattr(environment, "servecap", None)
    return state.run if state is not None else None


class LoadUser(User):
    """One closed-loop client (next request when the last one finished); in open loop the
    first user of each process drives the arrival schedule."""

    wait_time = constant(0)

    @task
    def step(self) -> None:
        run = current_run(self.environment)
        if run is None:  # the test failed to start; the runner is quitting
            self.wait()
            return
        run.user_step()
