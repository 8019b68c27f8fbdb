"""A session trace's TTFT per turn and its quantiles, the plan against the fleet, from a plan_vs_fleet directory.

    python -m lab.servecap.session_turns --out RUN_DIR --gpu l4 --model llama-3.1-8b --max-model-len 4096 \\
        [--routers round_robin,cache_aware] -- SHARED FLAGS

Runs each router's plan again in-process on the SHARED FLAGS (the demand a trace of sessions) and reads the
fleet's records in RUN_DIR/fleet-ROUTER: per turn, TTFT p50 and p90 on each side; over every request, the
TTFT quantiles from q25 to q75 (where a median between the hit and the miss modes sits); the fleet's share of
requests whose prompt was at least half cached. Prints; writes nothing.
"""

from __future__ import annotations

import argparse

import numpy as np

from calculators.plan.fleet import run_fleet
from contract.records import read_records
from servecap.plan.cli import _inputs, _parser
from servecap.plan.run import build_demand


def turns_of(demand) -> np.ndarray:
    turn = np.ones(len(demand), dtype=int)
    for i in np.flatnonzero(demand.after >= 0):
        turn[i] = turn[demand.after[i]] + 1   # a turn's predecessor comes before it in the demand
    return turn


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--gpu", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--max-model-len", required=True)
    p.add_argument("--routers", default="round_robin,cache_aware")
    p.add_argument("shared", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    shared = [a for a in args.shared if a != "--"]
    for router in args.routers.split(","):
        plan_args = _parser().parse_args(["--gpu", args.gpu, "--model", args.model, "--max-model-len",
                                          args.max_model_len, *shared, "--router", router])
        inputs = _inputs(plan_args)
        demand = build_demand(inputs["demand_spec"])
        run = run_fleet(demand, inputs["config"])
        turn = turns_of(demand)
        rows = [r for r in read_records(f"{args.out}/fleet-{router}/requests.jsonl") if r.get("t_sched") is not None]
        measured = {k: np.array([r["ttft_s"] for r in rows if r["turn"] == k]) for k in sorted({r["turn"] for r in rows})}
        print(router)
        for k, fleet in measured.items():
            plan = run.ttft_s[turn == k]
            print(f"  turn {k}: plan p50 {np.median(plan):.3f} p90 {np.percentile(plan, 90):.3f} s | fleet p50 "
                  f"{np.median(fleet):.3f} p90 {np.percentile(fleet, 90):.3f} s  ({len(plan)} / {len(fleet)} requests)")
        every = np.array([r["ttft_s"] for r in rows])
        print("  every request, TTFT q25/q40/q50/q60/q75: plan "
              + " ".join(f"{np.percentile(run.ttft_s, q):.3f}" for q in (25, 40, 50, 60, 75)) + " | fleet "
              + " ".join(f"{np.percentile(every, q):.3f}" for q in (25, 40, 50, 60, 75)))
        half = np.mean([(r.get("cached_tokens") or 0) / r["prompt_tokens"] >= 0.5 for r in rows])
        print(f"  mean TTFT plan {np.mean(run.ttft_s):.3f} fleet {np.mean(every):.3f} s; fleet requests at least "
              f"half cached {half:.1%}")


if __name__ == "__main__":
    main()
