"""How fast `servecap plan` simulates a day: one fleet run over a synthetic diurnal demand.

    .venv/bin/python -m lab.calculators.plan_speed [--from-hour 11] [--hours 1] [--replicas 32] [--router round_robin]

Builds a 1,000,000-request day (a diurnal curve with bursts, 20 requests/s at the peak and 2 at the trough,
scaled to a million; prompts uniform 200-2000, outputs uniform 50-400 tokens) for llama-3.1-8b on h100-sxm
replicas sized as vLLM would size them, runs one fixed fleet of `--replicas` over `--hours` of it from
`--from-hour` (the whole day takes too long to measure often), and prints the wall and CPU seconds, the
CPU microseconds per request, and what the whole day would take at that rate (an extrapolation: say so).
The target (issue 36) is a 1,000,000-request day over up to 32 replicas in 120 s on one core.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from calculators.plan.demand_curves import diurnal_with_bursts, rate_curve_arrivals
from calculators.plan.fleet import FleetConfig, run_fleet
from calculators.plan.sizing import gpu_replica
from contract.distributions import parse_length_distribution


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--from-hour", type=float, default=11.0)
    p.add_argument("--hours", type=float, default=1.0)
    p.add_argument("--replicas", type=int, default=32)
    p.add_argument("--router", default="round_robin")
    args = p.parse_args(argv)
    times, rates = diurnal_with_bursts(peak_rps=20.0, trough_rps=2.0, duration_s=86400.0, bursts_per_day=4.0,
                                       burst_multiplier=2.0, burst_duration_s=600.0, seed=0)
    scale = 1_000_000 / float(np.trapezoid(rates, times))   # the day's rate curve, scaled to a million requests
    day = rate_curve_arrivals(times, np.asarray(rates) * scale, prompt=parse_length_distribution("uniform:200:2000"),
                              output=parse_length_distribution("uniform:50:400"), seed=0)
    start = args.from_hour * 3600
    part = day.window(start, start + args.hours * 3600)
    demand = replace(part, t_s=part.t_s - start, duration_s=args.hours * 3600)
    replica = gpu_replica("h100-sxm", "llama-3.1-8b", dtype="bf16", tp=1, engine="vllm")
    config = FleetConfig(replica, args.router, initial_replicas=args.replicas)
    wall, cpu = time.perf_counter(), time.process_time()
    run = run_fleet(demand, config, lambda done, total: print(f"  {done:,} of {total:,}", flush=True))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finished = int(np.isfinite(run.end_s).sum())
    print(f"{len(day):,}-request day, hours {args.from_hour:g}-{args.from_hour + args.hours:g}: {len(demand):,} "
          f"requests ({finished:,} finished), {args.replicas} replicas, {args.router}: {wall:.1f} s wall, "
          f"{cpu:.1f} s CPU, {cpu / len(demand) * 1e6:,.0f} us CPU a request; the whole day at this rate "
          f"(extrapolated): {cpu / len(demand) * len(day):,.0f} s against the 120 s target")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
