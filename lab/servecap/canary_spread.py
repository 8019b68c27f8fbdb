"""How much of a canary's planned attainment is the split's luck: the plan's canary over one demand, the
split drawn again with other seeds (the demand, the pools and the SLO unchanged), each version's
attainment per draw.

    python -m lab.servecap.canary_spread --splits 16 -- PLAN FLAGS (as `servecap plan` takes them, with --canary-weight)

A proxy's split (nginx's split_clients over $request_id) is a fresh draw in every run, so a measured
canary is one draw of this spread; the plan's figure is another. Prints and writes nothing else.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    own, plan_flags = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    p = argparse.ArgumentParser(prog="python -m lab.servecap.canary_spread", description=__doc__.split("\n\n")[0])
    p.add_argument("--splits", type=int, default=16)
    args = p.parse_args(own)
    from calculators.plan.canary import plan_canary
    from servecap.plan.cli import _inputs, _parser
    from servecap.plan.run import build_demand

    inputs = _inputs(_parser().parse_args(plan_flags))
    second = inputs["second"]
    if second is None or second.kind != "canary":
        raise SystemExit("give --canary-weight among the plan's flags")
    demand = build_demand(inputs["demand_spec"])
    rows = []
    for k in range(args.splits):
        split = plan_canary(demand, inputs["config"], second.config, second.schedule, inputs["slo"],
                            window_s=inputs["window_s"], seed=inputs["config"].seed + k)
        rows.append((split.primary.outcome.attainment, split.canary.outcome.attainment, int(split.mask.sum())))
        print(f"split {k:>2}: primary {rows[-1][0]:.1%} canary {rows[-1][1]:.1%} ({rows[-1][2]} requests)", flush=True)
    for name, column in (("primary", 0), ("canary", 1)):
        values = 100 * np.array([row[column] for row in rows])
        print(f"{name}: attainment over {len(rows)} splits: median {np.median(values):.1f}%, "
              f"range {values.min():.1f}..{values.max():.1f}%, sd {values.std(ddof=1):.1f} points")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
