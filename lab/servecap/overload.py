"""Overload benchmark: 3x the sustainable load for a minute against a live server.

    python -m lab.servecap.overload [--duration-s 60] [--overload 3] [--max-waiting 16]

Phases (a fresh `python -m reference_server` subprocess, tiny preset by default):
1. idle latency: sequential requests, the reference end-to-end latency;
2. capacity: closed loop at `--concurrency` (default 32 = the default --max-num-seqs, a full batch)
   for `--calibrate-s`; completed req/s = the sustainable rate;
3. overload: open-loop Poisson arrivals at `--overload` x that rate for `--duration-s`, while the
   server's RSS is sampled every second; admitted requests must finish, the rest get 429 at once;
4. recovery: from the moment the load stops (while the admitted backlog drains), sequential
   probes until one's latency is back within `--recovered-factor` x the idle p50; the time
   from the end of the load to the end of that probe is the recovery time.
5. idle latency again, to read the recovery against (on a shared machine the box itself changes).
The process must stay up throughout. Prints a table (and JSON with --json); `sent_rps` shows the
load actually offered (the client runs on the same machine and may fall short of the target).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import shlex
import statistics
import time

import httpx
import numpy as np
import psutil
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec


ERRORS: collections.Counter = collections.Counter()   # "what went wrong" -> count, for the report


async def _one(client: httpx.AsyncClient, body: dict) -> tuple[int, float]:
    start = time.monotonic()
    try:
        response = await client.post("/v1/completions", json=body)
    except httpx.HTTPError as exc:
        ERRORS[f"{type(exc).__name__}: {exc}"[:120]] += 1
        return -1, time.monotonic() - start
    if response.status_code not in (200, 429):
        ERRORS[f"HTTP {response.status_code}: {response.text}"[:120]] += 1
    return response.status_code, time.monotonic() - start


async def sequential(client, body, seconds: float, progress, label: str) -> list[float]:
    task = progress.add_task(label, total=seconds)
    latencies, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        status, latency = await _one(client, body)
        if status == 200:
            latencies.append(latency)
        progress.update(task, completed=seconds - max(end - time.monotonic(), 0))
    return latencies


async def closed_loop(client, body, concurrency: int, seconds: float, progress) -> float:
    """Completed requests per second with `concurrency` clients always busy."""
    task = progress.add_task(f"capacity (c={concurrency})", total=seconds)
    done, start = 0, time.monotonic()
    end = start + seconds

    async def worker():
        nonlocal done
        while time.monotonic() < end:
            status, _ = await _one(client, body)
            done += status == 200
            progress.update(task, completed=min(time.monotonic() - start, seconds))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / (time.monotonic() - start)


async def open_loop(client, body, rate_rps: float, seconds: float, pid: int, progress, seed: int = 0) -> dict:
    """Poisson arrivals at `rate_rps`; returns statuses, admitted latencies and RSS samples."""
    task = progress.add_task(f"overload ({rate_rps:.1f} req/s)", total=seconds)
    rng = np.random.default_rng(seed)
    server = psutil.Process(pid)
    results: list[tuple[int, float]] = []
    rss: list[int] = [server.memory_info().rss]
    in_flight: set[asyncio.Task] = set()
    start = time.monotonic()
    next_send, next_sample = start, start + 1.0
    while (now := time.monotonic()) < start + seconds:
        if now >= next_sample:
            rss.append(server.memory_info().rss)
            next_sample += 1.0
            progress.update(task, completed=now - start)
        if now >= next_send:
            t = asyncio.create_task(_one(client, body))
            t.add_done_callback(lambda done: results.append(done.result()))
            in_flight.add(t)
            t.add_done_callback(in_flight.discard)
            next_send += rng.exponential(1.0 / rate_rps)
        await asyncio.sleep(max(0.0, min(next_send, next_sample) - time.monotonic()))
    progress.update(task, completed=seconds)
    return {"results": results, "rss": rss, "in_flight": in_flight, "ended": time.monotonic()}


async def recovery(client, body, target_s: float, limit_s: float) -> tuple[float | None, list]:
    """Seconds after the load ended until a probe's latency is <= target_s (None if never)."""
    start, probes = time.monotonic(), []
    while time.monotonic() - start < limit_s:
        status, latency = await _one(client, body)
        probes.append((status, round(latency, 3)))   # 429s while the admitted backlog drains
        if status == 200 and latency <= target_s:
            return time.monotonic() - start, probes
    return None, probes


def percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


async def run(args) -> dict:
    server_args = ["--model", args.model, "--max-waiting", str(args.max_waiting), "--no-classifier",
                   *shlex.split(args.server_args)]
    body = {"prompt": "overload benchmark", "max_tokens": args.max_tokens, "ignore_eos": True}
    with ServerProcess(ReferenceServerSpec.from_flags(server_args)) as server, Progress(transient=True) as progress:
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120, limits=limits) as client:
            idle = await sequential(client, body, args.idle_s, progress, "idle latency")
            capacity = await closed_loop(client, body, args.concurrency, args.calibrate_s, progress)
            overload = await open_loop(client, body, args.overload * capacity, args.duration_s, server.pid, progress)
            idle_p50 = statistics.median(idle)
            # probe from the moment the load stops, while the admitted backlog still drains
            probing = asyncio.create_task(
                recovery(client, body, args.recovered_factor * idle_p50, args.recovery_limit_s))
            if overload["in_flight"]:
                await asyncio.wait(overload["in_flight"])   # admitted requests are never dropped
            drained_s = time.monotonic() - overload["ended"]
            overload["rss"].append(psutil.Process(server.pid).memory_info().rss)
            recovered_s, probes = await probing
            # the same idle measurement again: on a shared machine the box itself may have
            # become slower or faster meanwhile, which the recovery figure must be read against
            idle_after = await sequential(client, body, args.idle_s, progress, "idle latency, after")
        alive = server.process.poll() is None
        exit_code = server.stop()
    statuses = [s for s, _ in overload["results"]]
    admitted = [lat for s, lat in overload["results"] if s == 200]
    rejected = [lat for s, lat in overload["results"] if s == 429]
    rss = overload["rss"]
    return {
        "server_args": server_args, "max_tokens": args.max_tokens,
        "idle_e2e_p50_s": idle_p50, "sustainable_rps": capacity,
        "offered_rps": args.overload * capacity, "duration_s": args.duration_s,
        "sent": len(statuses), "sent_rps": len(statuses) / args.duration_s, "admitted": len(admitted), "rejected_429": len(rejected),
        "other_errors": len(statuses) - len(admitted) - len(rejected),
        "admitted_rps": len(admitted) / args.duration_s,
        "admitted_e2e_p50_s": percentile(admitted, 50), "admitted_e2e_p99_s": percentile(admitted, 99),
        "rejected_429_p99_s": percentile(rejected, 99),
        "backlog_drained_after_s": drained_s,
        "rss_start_mib": rss[0] / 2**20, "rss_max_mib": max(rss) / 2**20, "rss_end_mib": rss[-1] / 2**20,
        "recovered_after_s": recovered_s, "recovery_probes_status_latency_s": probes[:20],
        "idle_e2e_p50_after_s": statistics.median(idle_after) if idle_after else None,
        "process_alive_after_load": alive, "exit_code_after_sigterm": exit_code,
        "errors": dict(ERRORS),
    }


def print_table(report: dict, console: Console) -> None:
    table = Table(title="servecap overload benchmark", show_header=True)
    table.add_column("figure")
    table.add_column("value", justify="right")

    def fmt(value) -> str:
        if value is None:
            return "-"
        return f"{value:.3f}" if isinstance(value, float) else str(value)

    for key, value in report.items():
        if key not in ("server_args", "recovery_probes_status_latency_s", "errors"):
            table.add_row(key, fmt(value))
    console.print(table)
    console.print(f"server: python -m reference_server {' '.join(report['server_args'])}")
    for message, count in report["errors"].items():
        console.print(f"error x{count}: {message}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.servecap.overload", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny")
    p.add_argument("--max-waiting", type=int, default=16, help="the server's admission limit")
    p.add_argument("--max-tokens", type=int, default=128,
                   help="output tokens per request (ignore_eos); long enough that one Python client "
                        "can offer 3x what the server sustains")
    p.add_argument("--concurrency", type=int, default=32,
                   help="closed-loop clients for the capacity phase (default: the server's --max-num-seqs)")
    p.add_argument("--idle-s", type=float, default=5.0)
    p.add_argument("--calibrate-s", type=float, default=15.0)
    p.add_argument("--duration-s", type=float, default=60.0)
    p.add_argument("--overload", type=float, default=3.0, help="offered load as a multiple of capacity")
    p.add_argument("--recovered-factor", type=float, default=1.5, help="recovered = probe <= this x idle p50")
    p.add_argument("--recovery-limit-s", type=float, default=60.0)
    p.add_argument("--server-args", default="", help="extra flags for the server, one string")
    p.add_argument("--json", action="store_true", help="print the report as JSON too")
    args = p.parse_args(argv)
    console = Console()
    report = asyncio.run(run(args))
    print_table(report, console)
    if args.json:
        print(json.dumps(report, indent=2))
    healthy = report["process_alive_after_load"] and report["other_errors"] == 0 \
        and report["recovered_after_s"] is not None
    return 0 if healthy else 1


if __name__ == "__main__":
    raise SystemExit(main())
