"""One benchmark run: a scripted SSE server and one Locust process, records joined to truth.

Shared by `accuracy_bench.py` (32 streams) and `bench.py` (generator capacity). Starts
`python -m lab.loadgen.scripted_server` and `locust -f loadgen/chat.py` as subprocesses
(Locust never runs inside this process), then compares with `accuracy.compare`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lab.loadgen.accuracy import Comparison, compare
from loadgen.locust_command import CHAT_LOCUSTFILE as CHAT, locust_executable
from contract.loadgen_meta import read_meta
from contract.records import read_records

STOCK = Path(__file__).with_name("stock_baseline.py")


@dataclass(frozen=True)
class BenchResult:
    streams: int
    duration_s: float
    comparison: Comparison
    chunks_per_s: float
    loadgen_cpu_mean_pct: float | None   # the busiest Locust process's
    loadgen_cpu_max_pct: float | None
    loop_lag_p99_ms: float | None = None  # the worst process's event-loop lag


def _env() -> dict:
    env = dict(os.environ)
    repo = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _priority(nice: int, realtime: bool, rt_priority: int = 10):
    """Run the children at a higher CPU priority: `nice` < 0, or `realtime` (SCHED_FIFO; root
    only; kernel RT throttling still leaves 5% to others). On a busy box a woken process
    otherwise waits milliseconds for a CPU, which shows up as timing error on both sides.
    Locust gets a higher RT priority than the server, so it is never queued behind it."""
    if realtime:
        return lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(rt_priority))
    return (lambda: os.nice(nice)) if nice else None


def run_once(streams: int, duration_s: float, ttft_s: float, itl_s: float, output_tokens: int,
             server_processes: int = 1, workdir: Path | None = None, nice: int = 0,
             realtime: bool = False, client: str = "servecap", loadgen_processes: int = 1) -> BenchResult:
    """client: "servecap" (loadgen/chat.py) or "stock" (HttpUser + iter_lines baseline);
    loadgen_processes > 1: Locust's --processes (a master and that many workers)."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="servecap-bench-"))
    truth_path, records = workdir / f"truth-{streams}.jsonl", workdir / f"records-{streams}.jsonl"
    server = subprocess.Popen(
        [sys.executable, "-m", "lab.loadgen.scripted_server", "--port", "0", "--ttft", str(ttft_s), "--itl", str(itl_s),
         "--truth", str(truth_path), "--processes", str(server_processes)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env(), preexec_fn=_priority(nice, realtime))
    try:
        line = server.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"scripted server did not start: {line!r}")
        url = line.split()[-1]
        cmd = [*locust_executable(), "-f", str(STOCK if client == "stock" else CHAT),
               "--headless", "--only-summary", "--host", url, "-u", str(streams), "-r", str(streams),
               "-t", f"{duration_s:g}s", "--output-tokens", str(output_tokens), "--records", str(records),
               "--warmup", "1", "--level", f"c={streams}", "--stop-timeout", "0"]
        if client != "stock":
            cmd += ["--prompt-tokens", "64", "--model", "scripted"]
        if loadgen_processes > 1:
            cmd += ["--processes", str(loadgen_processes)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=duration_s + 120,
                              preexec_fn=_priority(nice, realtime, rt_priority=20))
        if proc.returncode != 0:
            raise RuntimeError(f"locust failed ({proc.returncode}): {proc.stderr[-2000:]}")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=10)
    truth = {}
    for raw in truth_path.read_text().splitlines():
        row = json.loads(raw)
        truth[row["id"]] = row
    rows = [r for r in read_records(records) if r["phase"] == "measure"]
    comparison = compare(rows, truth)
    span = (max(r["t_start"] + (r["e2e_s"] or 0) for r in rows) - min(r["t_start"] for r in rows)) if rows else 0
    received = sum(len(r["itl_s"]) + 1 for r in rows if r["ttft_s"] is not None)
    level = read_meta(records).get("levels", {}).get(f"c={streams}", {})
    processes = list(level.get("processes", {}).values()) or [{}]
    busiest = max(processes, key=lambda p: p.get("cpu_mean_pct") or 0)
    lag = level.get("loop_lag_p99_s")
    return BenchResult(streams, duration_s, comparison, received / span if span else 0.0,
                       busiest.get("cpu_mean_pct"), busiest.get("cpu_max_pct"), lag * 1e3 if lag is not None else None)
