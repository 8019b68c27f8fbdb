"""The one place that starts `locust`: a level, or a batch of a compare run's slices, as the real
`locust` command, headless, appending to the run's records.

`LocustInvocation` is everything one Locust process tree needs: the workload (handed over as the
workload options themselves, `WorkloadSpec.locust_argv`, which the locustfile parses back with the
same declarations), the load (users, or an open loop's rate and arrivals), the level's labels and
warm-up, and how many processes. Locust runs as a subprocess so the runner never mixes gevent with
anything else; while it runs, the records file is tailed to feed the progress bar.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from contract.records import Record
from contract.workload import WorkloadSpec
from loadgen.locust_command import CHAT_LOCUSTFILE, CLASSIFY_LOCUSTFILE, EMBED_LOCUSTFILE, locust_executable
from servecap.experiment.run_options import RunOptions

STOP_TIMEOUT_S = 30  # Locust waits this long for in-flight requests at the end, then records them incomplete
LOCUSTFILES = {"chat": CHAT_LOCUSTFILE, "classify": CLASSIFY_LOCUSTFILE, "embed": EMBED_LOCUSTFILE}


def round_seed(seed: int, round_index: int | None) -> int:
    """The seed of a level's round: round k draws its own requests (and its own open-loop arrival
    gaps) with seed + k; with the run's seed, every round replayed the same sequence, so four
    rounds of an open loop measured one Poisson draw four times."""
    return seed + (round_index or 0)


@dataclass(frozen=True)
class LocustInvocation:
    """One Locust run. users: closed-loop users (open loop: one schedule driver per process);
    rate_rps with arrival: an open loop; slice_plan: a compare run's slices (Locust's -t then only
    bounds it: the plan ends the run)."""

    workload: WorkloadSpec
    host: str
    records: Path
    level: str
    users: int
    run_time_s: float
    warmup_s: float = 0.0
    model: str | None = None
    rate_rps: float | None = None
    arrival: str = "poisson"
    round: int | None = None
    slice_plan: Path | None = None
    stop_timeout_s: int = STOP_TIMEOUT_S
    grpc_target: str | None = None
    options: RunOptions = RunOptions()
    worker_cpus: tuple[int, ...] | None = None
    prefix: tuple[str, ...] = ()

    @property
    def locustfile(self) -> Path:
        return LOCUSTFILES[self.workload.scenario]

    def argv(self) -> list[str]:
        options = self.options
        processes = options.loadgen_processes
        users = processes if self.rate_rps is not None and self.slice_plan is None else self.users
        command = [
            *self.prefix, *locust_executable(), "-f", str(self.locustfile), "--headless", "--only-summary",
            "--host", self.host, "-u", str(users), "-r", str(users), "-t", f"{max(1, round(self.run_time_s))}s",
            "--stop-timeout", str(self.stop_timeout_s), "--exit-code-on-error", "0",
            "--records", str(self.records), "--level", self.level, "--warmup", str(self.warmup_s),
            *self._workload_argv(),
        ]
        if self.model:
            command += ["--model", self.model]
        if self.grpc_target and self.workload.protocol == "grpc":
            command += ["--grpc-target", self.grpc_target]
        if self.round is not None:
            command += ["--round", str(self.round)]
        if self.rate_rps is not None:
            command += ["--rates", repr(float(self.rate_rps)), "--arrival", self.arrival]
        if self.slice_plan is not None:
            command += ["--slice-plan", str(self.slice_plan)]
        if options.hedge_after:
            command += ["--hedge-after", options.hedge_after]
        if options.loadgen_external_workers:
            # a master of its own, waiting for the local workers (worker_argv) and the external ones
            command += ["--master", "--master-bind-host", options.loadgen_master_bind,
                        "--master-bind-port", str(options.loadgen_master_port),
                        "--expect-workers", str(processes + options.loadgen_external_workers),
                        "--expect-workers-max-wait", str(round(options.loadgen_worker_wait_s))]
            # no --worker-cpus: it would pin workers on other machines to this one's core numbers
        elif processes > 1 and self.slice_plan is None:
            command += ["--processes", str(processes)]
            if self.worker_cpus and len(self.worker_cpus) >= processes:
                command += ["--worker-cpus", ",".join(str(core) for core in self.worker_cpus)]
        return command

    def _workload_argv(self) -> list[str]:
        """The workload's options, with this round's seed and the files as absolute paths."""
        workload = self.workload
        from dataclasses import replace

        absolute = {name: str(Path(getattr(workload, name)).resolve())
                    for name in ("dataset", "trace") if getattr(workload, name)}
        return replace(workload, seed=round_seed(workload.seed, self.round), **absolute).locust_argv()

    def worker_argv(self) -> list[list[str]]:
        """The local Locust workers of a master that also waits for external ones: one command (Locust's
        --worker --processes N); none otherwise (Locust's --processes forks them itself). Workers take
        their settings from the master's spawn message: only the locustfile and the master."""
        options = self.options
        if not options.loadgen_external_workers:
            return []
        bind = options.loadgen_master_bind
        command = [*self.prefix, *locust_executable(), "-f", str(self.locustfile), "--worker",
                   "--master-host", "127.0.0.1" if bind in ("0.0.0.0", "*", "") else bind,
                   "--master-port", str(options.loadgen_master_port)]
        if options.loadgen_processes > 1:
            command += ["--processes", str(options.loadgen_processes)]
        return [command]

    def timeout_s(self) -> float:
        """How long the runner waits before it kills this Locust (its own -t, its stop timeout, a margin)."""
        timeout = self.run_time_s + self.stop_timeout_s + 120
        if self.options.loadgen_external_workers:   # the master first waits for its workers to join
            timeout += self.options.loadgen_worker_wait_s
        return timeout


def level_invocation(experiment, level, level_id: str, host: str, records: Path, *, model: str | None = None,
                     grpc_target: str | None = None, worker_cpus: tuple[int, ...] | None = None,
                     prefix: tuple[str, ...] = ()) -> LocustInvocation:
    """One level (or round) of an experiment (servecap.experiment.spec) as a Locust run: `level` a
    servecap.experiment.profiles.Level, its window the plan's round window unless the level has its own."""
    load = experiment.load
    warmup_s, duration_s = level.window or load.round_window(level.round or 0)
    return LocustInvocation(
        workload=experiment.workload, host=host, records=records, level=level_id,
        users=1 if level.open_loop else int(level.load), run_time_s=warmup_s + duration_s, warmup_s=warmup_s,
        model=model, rate_rps=float(level.load) if level.open_loop and not level.trace else None,
        arrival=load.arrival, round=level.round, grpc_target=grpc_target, options=experiment.options,
        worker_cpus=worker_cpus, prefix=tuple(prefix))


class RecordsTail:
    """Reads the records appended since the last call (whole lines only; a line that is no record is skipped)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0
        self.records: list[Record] = []

    def poll(self) -> list[Record]:
        if not self.path.exists():
            return self.records
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.splitlines():
            try:
                self.records.append(Record.from_dict(json.loads(line)))
            except (ValueError, TypeError):  # TypeError: valid JSON that is not an object
                continue
        return self.records


def run_locust(invocation: LocustInvocation, log_path: Path,
               on_progress: Callable[[list[Record]], None] = lambda records: None) -> tuple[int, list[Record]]:
    """Run Locust to completion; returns (exit code, the records it wrote). Kills it past its timeout.
    Local workers of a master that waits for external ones start after it and end with it (they quit
    when the master does; any still running a few seconds later are killed)."""
    tail = RecordsTail(invocation.records)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(invocation.argv(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        helpers = [subprocess.Popen(worker, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                   for worker in invocation.worker_argv()]
    deadline = time.monotonic() + invocation.timeout_s()
    try:
        while process.poll() is None:
            if time.monotonic() > deadline:
                process.kill()
                break
            time.sleep(0.5)
            on_progress(tail.poll())
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        for helper in helpers:
            try:
                helper.wait(timeout=invocation.stop_timeout_s + 5)
            except subprocess.TimeoutExpired:
                helper.kill()
                helper.wait()
    return process.returncode, tail.poll()
