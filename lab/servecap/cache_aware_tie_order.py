"""Does the plan's cache_aware part from the fleet's because of the order its ties go in? A what-if against a
fleet already run: the plan again with least-load ties broken in a seeded hash order of the replicas (as
vllm-router's own worker list is not the order added: `lab.servecap.router_low_match`) instead of the first
started, compared with that fleet.

    python -m lab.servecap.cache_aware_tie_order --fleet DIR/fleet-cache_aware --out OUT [--salts 1,2,3] \\
        -- SHARED FLAGS (the fleet's demand, scaling, fault and SLO flags, as plan_vs_fleet takes them)

Per salt: OUT/saltN/plan-cache_aware (the plan with that order), then the per-window p99 TTFT median
|error| against the fleet, TTFT p50 both sides, the prefix-cache hit rates, and the requests each replica
served in the plan. The product's rule is not changed: the order is patched in this process only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import calculators.plan.cache_aware_router as cache_aware_router
from calculators.plan.router_base import mix64


def _hashed(salt: int):
    def least_loaded(replicas):
        return min(replicas, key=lambda v: (v.in_flight, mix64(salt * 1_000_003 + v.index))).index
    return least_loaded


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    shared = argv[argv.index("--") + 1:] if "--" in argv else []
    p = argparse.ArgumentParser(prog="python -m lab.servecap.cache_aware_tie_order", description=__doc__.split("\n\n")[0])
    p.add_argument("--fleet", required=True, help="a cache_aware fleet run directory (plan_vs_fleet's fleet-cache_aware)")
    p.add_argument("--out", required=True)
    p.add_argument("--salts", default="1,2,3")
    p.add_argument("--gpu", default="l4")
    p.add_argument("--model", default="llama-3.1-8b")
    p.add_argument("--max-model-len", type=int, default=4096)
    args = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    from lab.servecap.plan_vs_fleet import compare_pair
    from servecap.plan.cli import main as plan

    for salt in (int(s) for s in args.salts.split(",")):
        out = Path(args.out) / f"salt{salt}"
        out.mkdir(parents=True, exist_ok=True)
        link = out / "fleet-cache_aware"
        if not link.exists():
            link.symlink_to(Path(args.fleet).resolve())
        cache_aware_router.first_least_loaded = _hashed(salt)
        plan(["--gpu", args.gpu, "--model", args.model, "--max-model-len", str(args.max_model_len), *shared,
              "--router", "cache_aware", "--no-n-plus-one", "--static-max", "8", "--out", str(out / "plan-cache_aware")])
        c = compare_pair(out, "cache_aware")
        served = [(r["id"], r["served"]) for r in json.loads((out / "plan-cache_aware" / "plan.json").read_text())
                  ["timeline"]["replicas"]]
        print(f"salt {salt}: p99 TTFT median |error| {c['ttft_p99_median_abs_err']:.1%}; TTFT p50 plan "
              f"{c['ttft_p50_plan'] * 1e3:.0f} ms, fleet {c['ttft_p50_fleet'] * 1e3:.0f} ms; hit rate plan "
              f"{c['prefix_hit_rate_plan']:.3f}, fleet {c['prefix_hit_rate_fleet']:.3f}; served in the plan {served}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
