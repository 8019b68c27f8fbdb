"""One load level: the real `locust` command, headless, against a URL, appending to the run's records.

Locust runs as a subprocess so the sweep process never mixes gevent with anything
else. While it runs, the records file is tailed to feed the progress bar.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from contract.records import Record
from loadgen.locust_command import CHAT_LOCUSTFILE, CLASSIFY_LOCUSTFILE, EMBED_LOCUSTFILE, locust_executable
from servecap.sweep.config import SweepConfig

STOP_TIMEOUT_S = 30  # Locust waits this long for in-flight requests at the end, then records them incomplete


@dataclass(frozen=True)
class LevelPlan:
    """What one Locust invocation does. load is users (closed loop) or requests/s (open loop)."""

    level: str
    load: float
    warmup_s: float
    duration_s: float
    round: int | None = None     # sweep --rounds: which round of the level this is


def round_seed(seed: int, round_index: int | None) -> int:
    """The seed of a level's round: round k draws its own requests (and its own open-loop arrival
    gaps) with seed + k; with the run's seed, every round replayed the same sequence, so four
    rounds of an open loop measured one Poisson draw four times."""
    return seed + (round_index or 0)


def locust_command(config: SweepConfig, plan: LevelPlan, url: str, records: Path, model: str | None,
                   prefix: list[str] = (), worker_cpus: tuple[int, ...] | None = None,
                   grpc_target: str | None = None) -> list[str]:
    """worker_cpus: with several Locust processes, each worker takes one of these cores (by its index).
    grpc_target: a classify sweep over gRPC: the server's HOST:PORT."""
    run_time = max(1, round(plan.warmup_s + plan.duration_s))
    processes = config.loadgen_processes
    users = processes if config.open_loop else int(plan.load)   # open loop: one schedule driver per process
    command = [
        *prefix, *locust_executable(), "-f", str(_locustfile(config)), "--headless", "--only-summary",
        "--host", url, "-u", str(users), "-r", str(users), "-t", f"{run_time}s",
        "--stop-timeout", str(STOP_TIMEOUT_S), "--exit-code-on-error", "0",
        "--records", str(records), "--level", plan.level, "--warmup", str(plan.warmup_s),
        "--seed", str(round_seed(config.seed, plan.round)),
    ]
    if config.scenario == "classify":
        command += ["--rows", config.rows, "--kserve-model", config.model_name, "--protocol", config.protocol]
        if config.protocol == "grpc" and grpc_target:
            command += ["--grpc-target", grpc_target]
    elif config.scenario == "embed":
        command += ["--inputs", config.rows, "--input-tokens", config.prompt_tokens, "--embed-model", config.model_name]
    else:
        command += ["--prompt-tokens", config.prompt_tokens]
    if config.output_tokens and config.scenario == "chat":
        command += ["--output-tokens", config.output_tokens]
    if plan.round is not None:
        command += ["--round", str(plan.round)]
    if config.turns != 1:
        command += ["--turns", str(config.turns or "all"), "--think-time", str(config.think_time_s)]
    if config.dataset:
        command += ["--dataset", str(Path(config.dataset).resolve()), "--dataset-sampling", config.dataset_sampling,
                    "--chars-per-token", str(config.chars_per_token)]
    if model and config.scenario == "chat":
        command += ["--model", model]
    if config.model_mix:
        command += ["--model-mix", config.model_mix]
    if config.reasoning_tokens:
        command += ["--reasoning-tokens", config.reasoning_tokens]
    if config.loadgen_external_workers:
        # a master of its own, waiting for the local workers (worker_commands) and the external ones
        command += ["--master", "--master-bind-host", config.loadgen_master_bind,
                    "--master-bind-port", str(config.loadgen_master_port),
                    "--expect-workers", str(processes + config.loadgen_external_workers),
                    "--expect-workers-max-wait", str(round(config.loadgen_worker_wait_s))]
        # no --worker-cpus: it would pin workers on other machines to this one's core numbers
    elif processes > 1:
        command += ["--processes", str(processes)]
        if worker_cpus and len(worker_cpus) >= processes:
            command += ["--worker-cpus", ",".join(str(core) for core in worker_cpus)]
    if config.trace is not None:
        command += ["--trace", str(Path(config.trace).resolve()), "--trace-speedup", str(config.trace_speedup)]
        if config.trace_block_tokens is not None:
            command += ["--trace-block-tokens", str(config.trace_block_tokens)]
    elif config.open_loop:
        command += ["--arrival", config.arrival, "--rate", str(plan.load)]
    return command


def worker_commands(config: SweepConfig, prefix: list[str] = ()) -> list[list[str]]:
    """The local Locust workers of a level whose master also waits for external ones: one command
    (Locust's --worker --processes N); none otherwise (Locust's --processes forks them itself).
    Workers take their settings from the master's spawn message: only the locustfile and the master."""
    if not config.loadgen_external_workers:
        return []
    command = [*prefix, *locust_executable(), "-f", str(_locustfile(config)), "--worker",
               "--master-host", "127.0.0.1" if config.loadgen_master_bind in ("0.0.0.0", "*", "") else
               config.loadgen_master_bind, "--master-port", str(config.loadgen_master_port)]
    if config.loadgen_processes > 1:
        command += ["--processes", str(config.loadgen_processes)]
    return [command]


def _locustfile(config: SweepConfig) -> Path:
    return {"classify": CLASSIFY_LOCUSTFILE, "embed": EMBED_LOCUSTFILE}.get(config.scenario, CHAT_LOCUSTFILE)


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


def run_level(command: list[str], records: Path, log_path: Path, timeout_s: float,
              on_progress: Callable[[list[Record]], None],
              workers: list[list[str]] = ()) -> tuple[int, list[Record]]:
    """Run Locust to completion; returns (exit code, this level's records). Kills it past timeout_s.
    `workers`: commands of local Locust workers for this master, started after it and ended with it
    (they quit when the master does; any still running a few seconds later are killed)."""
    tail = RecordsTail(records)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        helpers = [subprocess.Popen(worker, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                   for worker in workers]
    deadline = time.monotonic() + timeout_s
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
                helper.wait(timeout=STOP_TIMEOUT_S + 5)
            except subprocess.TimeoutExpired:
                helper.kill()
                helper.wait()
    return process.returncode, tail.poll()
