"""The machine's own speed, per core, from a fixed unit of work timed on a fixed cadence: the run's speed clock.

Why: a shared VM can run the engine's steps for the same work much slower or faster from one
minute to the next with nothing else running (docs/results.md). The engine's step record can only tell
the engine core's speed, only for the reference server, and only from the level's own steps. The
canary tells each core's speed for any server (vLLM too) without reading anything the level measures.

Each tick, on each core in turn: pin this (single) thread to the core, run each unit once, and time it
in thread CPU time (CLOCK_THREAD_CPUTIME_ID: how long the unit ran, not how long it waited for the
core, so the run's own load on that core does not read as a slow machine) and in wall time. Then
each core's steal since the last tick (/proc/stat): time the hypervisor ran something else on the
core, which KVM reports and thread CPU time leaves out, while every wall-clock step pays it.

    unit      work                                         stands for
    python    a fixed pure-Python loop (~0.6 ms)           the interpreter: HTTP front ends, Locust
    numpy     a fixed float32 matmul chain, one BLAS       a CPU engine's step: small dense GEMMs
              thread (~0.5 ms)
    steal     /proc/stat's steal of each core              time taken by the host

How well it tracks the engine's own speed is measured by `python -m lab.reports.canary_tracking`
(figures in docs/results.md). A short unit on a fixed cadence misses brief runs of stalled steps.

canary.csv: one row per tick, core and unit (contract.canary owns its columns).

Cost: 2 units x 0.5 ms per core every 0.5 s, about 0.2% of each core. Run as its own process
(`python -m loadgen.observe.canary`) so that no other thread shares its interpreter and BLAS
starts with one thread; `start_canary` starts it, `Canary.stop()` ends it. The sweep runs one per
server (loadgen.observe.observers), each appending its rows under the server's `source`.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from contract.canary import CANARY_COLUMNS, CANARY_FILE, STEAL_UNIT
from contract.options import CommandParser, add_options, add_output_arguments
from loadgen.observe.periodic_csv import IntervalOption

INTERVAL_S = 0.5
SINGLE_THREADED = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _python_unit() -> int:
    total = 0
    for i in range(6000):
        total += (i * i) % 7
    return total


class _NumpyUnit:
    """A chain of 96x96 float32 matmuls on fixed seeded data: about 0.5 ms on one core here."""

    def __init__(self) -> None:
        import numpy as np

        rng = np.random.default_rng(0)
        self.a = rng.standard_normal((96, 96), dtype=np.float32) / 10
        self.b = rng.standard_normal((96, 96), dtype=np.float32) / 10

    def __call__(self) -> float:
        x = self.a
        for _ in range(12):
            x = x @ self.b
        return float(x[0, 0])


def _units() -> dict:
    """The units, in CANARY_UNITS order. A third, four tiny transformer layers in torch (what a small
    model's decode step is made of), was tried and left out: it tracked the engine's drift no better
    (r 0.71 against numpy's 0.84 over a sweep's 24 windows) and cost torch in this process."""
    return {"python": _python_unit, "numpy": _NumpyUnit()}


def _timed(unit) -> tuple[float, float]:
    wall0 = time.perf_counter()
    cpu0 = time.thread_time()
    unit()
    cpu1 = time.thread_time()
    return cpu1 - cpu0, time.perf_counter() - wall0   # wall brackets CPU: cpu <= wall but for the clocks


def read_steal(path: str = "/proc/stat") -> dict[int, tuple[float, float]]:
    """{core: (stolen s, all accounted s)} since boot from /proc/stat's per-cpu lines; {} where there is none."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out = {}
    try:
        with open(path) as fh:
            for line in fh:
                name, *fields = line.split()
                if name.startswith("cpu") and name[3:].isdigit() and len(fields) >= 8:
                    ticks = [int(x) for x in fields[:8]]   # user nice system idle iowait irq softirq steal
                    out[int(name[3:])] = (ticks[7] / tick, sum(ticks) / tick)
    except (OSError, ValueError):
        return {}
    return out


def run(out: Path, source: str, cores: list[int], interval_s: float) -> None:
    """Tick until SIGTERM; each row flushed, so a killed run keeps what it had."""
    units = _units()
    steal_before = read_steal()
    for unit in units.values():   # warm: first calls pay for imports and page faults
        unit()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    new = not out.exists() or out.stat().st_size == 0
    with open(out, "a", newline="") as fh:
        writer = csv.writer(fh)
        if new:
            writer.writerow(CANARY_COLUMNS)
            fh.flush()
        next_tick = time.monotonic()
        while not stop:
            for core in cores:
                os.sched_setaffinity(0, {core})   # pid 0: this thread; the unit then runs on `core` only
                for name, unit in units.items():
                    cpu_s, wall_s = _timed(unit)
                    writer.writerow((f"{time.time():.6f}", source, core, name, f"{cpu_s:.9f}", f"{wall_s:.9f}"))
            steal_now = read_steal()
            for core in cores:
                if core in steal_now and core in steal_before:
                    stolen = steal_now[core][0] - steal_before[core][0]
                    accounted = steal_now[core][1] - steal_before[core][1]
                    writer.writerow((f"{time.time():.6f}", source, core, STEAL_UNIT, f"{stolen:.3f}", f"{accounted:.3f}"))
            steal_before = steal_now
            fh.flush()
            next_tick += interval_s
            time.sleep(max(0.0, next_tick - time.monotonic()))


class Canary:
    """The canary's process; `stop()` ends it and says how many rows it left."""

    def __init__(self, process: subprocess.Popen, path: Path, rows_before: int) -> None:
        self.process, self.path, self.rows_before = process, path, rows_before

    def stop(self) -> int:
        """End the process; the rows it wrote (an earlier server's canary may have written the rest)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return _rows(self.path) - self.rows_before


def _rows(path: Path) -> int:
    try:
        with open(path) as fh:
            return max(0, sum(1 for _ in fh) - 1)
    except OSError:
        return 0


def start_canary(out_dir: Path, source: str, cores: list[int] | None = None,
                 interval_s: float = INTERVAL_S) -> Canary:
    """Start timing each of `cores` into out_dir/canary.csv; default: every core of the machine, not only
    those this process is pinned to (the sweep pins its own threads to the load generator's core, and
    the canary is there to time the engine's too)."""
    cores = sorted(cores if cores is not None else range(os.cpu_count() or 1))
    path = Path(out_dir) / CANARY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "loadgen.observe.canary", "--out", str(path), "--source", source,
               "--cores", ",".join(map(str, cores)), "--interval", str(interval_s)]
    rows_before = _rows(path)
    process = subprocess.Popen(command, env={**os.environ, **SINGLE_THREADED}, stdin=subprocess.DEVNULL)
    return Canary(process, path, rows_before)


def _can_run_on(core: int) -> bool:
    """Whether this process may pin itself to `core` (its cpuset may leave some out); pins it there."""
    try:
        os.sched_setaffinity(0, {core})
    except (OSError, ValueError):
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="python -m loadgen.observe.canary", description=__doc__.split("\n")[0])
    add_output_arguments(parser, out="the canary.csv to append to", metavar="FILE", required=True, report=False)
    parser.add_argument("--source", default="run", help="the server the rows are of (their source column)")
    parser.add_argument("--cores", default=None, help="comma-separated core ids (default: every core allowed)")
    add_options(parser, IntervalOption, typed=True)
    parser.set_defaults(interval=INTERVAL_S)
    args = parser.parse_args(argv)
    try:
        wanted = (range(os.cpu_count() or 1) if args.cores is None
                  else [int(c) for c in args.cores.split(",") if c.strip()])
    except ValueError:
        parser.error(f"--cores: {args.cores!r} is not a comma-separated list of core ids")
    if not args.interval > 0:
        parser.error(f"--interval must be > 0, got {args.interval}")
    cores = [core for core in wanted if _can_run_on(core)]
    if not cores:
        parser.error(f"--cores: this process may run on none of {list(wanted)}")
    if len(cores) < len(wanted):
        print(f"canary: cores {sorted(set(wanted) - set(cores))} are not allowed here; timing {cores}", file=sys.stderr)
    run(Path(args.out), args.source, cores, args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
