"""Benchmark: how fast the simulator runs 10,000 requests per strategy (target: under 2 s each).

    .venv/bin/python -m lab.calculators.simulate [--requests 10000] [--json]

SimWorkload: prompts 64-256 tokens, outputs 16-256 tokens; closed loop at concurrency 32 and open
loop at 4 requests/s; step time 10 ms + 0.5 ms per sequence + 20 us per prompt token.

The simulator steps the engine's own scheduler and postprocess once per engine step, except over
steady decode stretches (the same batch of decodes until something arrives, finishes or needs a
block), which it runs at once (``calculators.sim.sim_engine``'s fast path). Each row prints the cost
per sequence-step (one sequence in one step: ~136 per request here) next to the total; before the
fast path it was about constant (issue 11: 2.7-5.0 s per run here), now it is what the stretches
leave to step one by one.
"""

from __future__ import annotations

import argparse
import json
import time

from calculators.sim.simulate import SimServer, SimWorkload, simulate
from calculators.sim.step_model import StepTimeModel
from contract.distributions import LengthDistribution
from engine_core.scheduling.strategies import STRATEGIES

TARGET_S = 2.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    model = StepTimeModel(base_s=0.010, per_seq_s=0.0005, per_prefill_token_s=2e-5)
    lengths = dict(prompt_tokens=LengthDistribution.uniform(64, 256), output_tokens=LengthDistribution.uniform(16, 256),
                   requests=args.requests)
    rows = []
    for strategy in STRATEGIES:
        server = SimServer.from_flags(strategy, max_num_seqs=64, batch_size=16, max_batch_size=16)
        for label, workload in (("closed c=32", SimWorkload(**lengths, concurrency=32)),
                                ("open 4 rps", SimWorkload(**lengths, rate_rps=4.0))):
            start = time.perf_counter()
            result = simulate(server, workload, model)
            elapsed = time.perf_counter() - start
            sequence_steps = result.mean_batch_size * result.steps
            rows.append({"strategy": strategy, "load": label, "requests": args.requests, "wall_s": elapsed,
                         "steps": result.steps, "sequence_steps": round(sequence_steps),
                         "us_per_sequence_step": elapsed / sequence_steps * 1e6,
                         "simulated_requests_per_wall_s": args.requests / elapsed,
                         "output_tokens_per_s_simulated": result.output_tokens_per_s,
                         "within_target": elapsed < TARGET_S})
    if args.json:
        print(json.dumps({"target_wall_s": TARGET_S, "runs": rows}, indent=2))
    else:
        print(f"simulate: {args.requests} requests per run, target < {TARGET_S} s wall")
        for row in rows:
            print(f"  {row['strategy']:>10} {row['load']:>12}: {row['wall_s']:.3f} s wall "
                  f"({row['simulated_requests_per_wall_s']:,.0f} requests/s; {row['steps']:,} steps, "
                  f"{row['us_per_sequence_step']:.2f} us per sequence-step)  "
                  f"{'ok' if row['within_target'] else 'OVER TARGET'}")
    return 0 if all(row["within_target"] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
