"""Load-generator capacity: SSE chunks/s one Locust process consumes while timing stays accurate.

    python -m lab.loadgen.capacity [--streams 32,64,128,256] [--itl 0.01] [--duration 6] [--realtime]
                                     [--loadgen-processes 1,2] [--json]

For each stream count, a scripted server (`--server-processes` accept loops) streams one
token every `--itl` to that many closed-loop Locust users in ONE Locust process; records
are matched to the server's truth (see accuracy_bench). The capacity is the highest
chunks/s at which TTFT and ITL errors stay within 1 ms p50 / 3 ms p99; the table also
shows the Locust process's CPU, so the CPU at which accuracy degrades can be read off.
Past that, add Locust processes: `--loadgen-processes 1,2,4` measures each count in turn
(Locust's `--processes N`), with each count's own capacity and its worst process's loop lag.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict

from lab.loadgen.accuracy_bench import TARGET_P50_MS, TARGET_P99_MS
from lab.loadgen.run import run_once


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.loadgen.capacity", description=__doc__.split("\n")[0])
    parser.add_argument("--streams", default="32,64,128,256", help="comma-separated concurrent streams")
    parser.add_argument("--itl", type=float, default=0.01)
    parser.add_argument("--ttft", type=float, default=0.02)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--server-processes", type=int, default=2)
    parser.add_argument("--realtime", action="store_true", help="SCHED_FIFO for server and Locust (root)")
    parser.add_argument("--loadgen-processes", default="1", help="comma list of Locust process counts to measure")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        levels = [int(x) for x in args.streams.split(",")]
        counts = [int(x) for x in args.loadgen_processes.split(",")]
    except ValueError:
        parser.error("--streams and --loadgen-processes must be comma-separated integers")
    if any(n < 1 for n in levels + counts) or args.itl <= 0 or args.duration <= 2:
        parser.error("need streams >= 1, processes >= 1, --itl > 0 and --duration > 2")
    summary = {"cpu_count": os.cpu_count(), "realtime": args.realtime, "by_processes": {}}
    for processes in counts:
        summary["by_processes"][str(processes)] = _measure(args, levels, processes)
    if args.json:
        print(json.dumps(summary))
    return 0


def _measure(args, levels: list[int], processes: int) -> dict:
    rows = []
    print(f"host: {os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.1f}; ITL {args.itl * 1e3:g} ms; "
          f"{'SCHED_FIFO' if args.realtime else 'normal priority'}; {processes} Locust process(es)", file=sys.stderr)
    print(f"{'streams':>8}{'chunks/s':>10}{'locust CPU%':>13}{'lag p99':>9}{'TTFT p50':>10}{'p99':>8}{'ITL p50':>10}"
          f"{'p99':>8}  ok", file=sys.stderr)
    for streams in levels:
        r = run_once(streams, args.duration, args.ttft, args.itl, args.output_tokens, args.server_processes,
                     realtime=args.realtime, loadgen_processes=processes)
        c = r.comparison
        ok = c.ttft.within(TARGET_P50_MS, TARGET_P99_MS) and c.itl.within(TARGET_P50_MS, TARGET_P99_MS)
        p50_ok = c.ttft.within(TARGET_P50_MS, float("inf")) and c.itl.within(TARGET_P50_MS, float("inf"))
        rows.append({"streams": streams, "chunks_per_s": r.chunks_per_s, "cpu_mean_pct": r.loadgen_cpu_mean_pct,
                     "cpu_max_pct": r.loadgen_cpu_max_pct, "loop_lag_p99_ms": r.loop_lag_p99_ms,
                     "ttft": asdict(c.ttft), "itl": asdict(c.itl), "within": ok, "within_p50": p50_ok})
        print(f"{streams:>8}{r.chunks_per_s:>10.0f}{r.loadgen_cpu_mean_pct or 0:>13.0f}{r.loop_lag_p99_ms or 0:>9.2f}"
              f"{c.ttft.p50_abs_ms:>10.2f}"
              f"{c.ttft.p99_abs_ms:>8.2f}{c.itl.p50_abs_ms:>10.2f}{c.itl.p99_abs_ms:>8.2f}  {'yes' if ok else 'NO'}",
              file=sys.stderr)
    summary = {"levels": rows}
    for key, label in (("within", f"p50 <= {TARGET_P50_MS:g} ms and p99 <= {TARGET_P99_MS:g} ms"),
                       ("within_p50", f"p50 <= {TARGET_P50_MS:g} ms")):
        # capacity: the last level of the unbroken run of accurate levels from the lowest load
        run = []
        for row in rows:
            if not row[key]:
                break
            run.append(row)
        first_bad = rows[len(run)] if len(run) < len(rows) else None
        capacity = run[-1]["chunks_per_s"] if run else 0.0
        summary[key] = {"capacity_chunks_per_s": capacity,
                        "degrades_at_streams": first_bad and first_bad["streams"],
                        "degrades_at_cpu_pct": first_bad and first_bad["cpu_mean_pct"]}
        if not args.json:
            print(f"{processes} Locust process(es), {label}: {capacity:.0f} chunks/s; "
                  + (f"degrades at {first_bad['streams']} streams, Locust CPU {first_bad['cpu_mean_pct']:.0f}%"
                     if first_bad else "no tested level degraded"))
    return summary


if __name__ == "__main__":
    sys.exit(main())
