"""How a closed loop's users gather into prefill groups in the simulator: every step of one run, and the TTFT
of each request in send order (issue 54's closed-loop waves).

    .venv/bin/python -m lab.calculators.closed_loop_waves [--model llama-3.1-8b --gpu h100-sxm --dtype fp8
        --engine tensorrt-llm --prompt-tokens 2000 --output-tokens 200 --concurrency 25 --requests 100]

Prints the steps that carry prompt tokens (start, duration, sequences, prompt tokens, decodes) and, for
every `concurrency`-th request in send order, its send time and TTFT: the first wave prefills as the
step budget allows; whether later waves stay together or rotate in groups shows in their TTFTs.
With --front-end-ms, the same run's TTFT (mean, p50, p90 over `--requests` x 6, measure window as `calc
simulate`'s) with each request reaching the engine that many ms after its send and its answer reaching the
client half that after the engine's token: a group that finishes as a step starts then misses it.
"""

from __future__ import annotations

import argparse

import numpy as np

from calculators.gpu_engine import gpu_engine
from calculators.sim.sim_engine import run_engine
from calculators.sim.front_end import FrontEnd
from calculators.sim.simulate import SimServer, SimWorkload, simulate
from calculators.sim.state import Arrivals, StepClock, Trace
from contract.distributions import LengthDistribution
from engine_core.gpus import get_gpu
from engine_core.models import resolve_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.calculators.closed_loop_waves", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="llama-3.1-8b")
    parser.add_argument("--gpu", default="h100-sxm")
    parser.add_argument("--dtype", default="fp8")
    parser.add_argument("--engine", default="tensorrt-llm")
    parser.add_argument("--prompt-tokens", type=int, default=2000)
    parser.add_argument("--output-tokens", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=25)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--front-end-ms", default="", help="comma list of in-delays, e.g. 0,0.5,2,10")
    args = parser.parse_args(argv)
    sizing = gpu_engine(resolve_model(args.model), get_gpu(args.gpu), dtype=args.dtype, engine=args.engine)
    server = SimServer.from_flags("continuous", num_kv_blocks=sizing.num_kv_blocks, block_size=sizing.block_size,
                                  **sizing.defaults.limit_flags())
    n = args.requests
    trace = Trace(prompt=np.full(n, args.prompt_tokens), output=np.full(n, args.output_tokens), arrival=np.zeros(n),
                  first_token=np.full(n, np.nan), end=np.full(n, np.nan), reasoning=np.zeros(n, dtype=int))
    steps = []
    run_engine(server, StepClock(sizing.step_model, np.random.default_rng(0), ()), trace,
               Arrivals(trace, schedule=None, concurrency=args.concurrency),
               on_step=lambda start, duration, shape: steps.append((start, duration, shape)))
    print(f"{sizing.describe()}; {server.limits}")
    print("steps with prompt tokens: start ms, duration ms, sequences, prompt tokens, decodes")
    for start, duration, shape in steps:
        if shape.prefill_tokens:
            print(f"{start * 1000:9.1f} {duration * 1000:8.2f} {shape.sequences:5d} {shape.prefill_tokens:6d} "
                  f"{shape.decode_seqs:5d}")
    ttft = (trace.first_token - trace.arrival) * 1000
    print("every concurrency-th request in send order: sent ms, TTFT ms")
    for i in np.argsort(trace.arrival, kind="stable")[::args.concurrency]:
        print(f"{trace.arrival[i] * 1000:9.1f} {ttft[i]:8.1f}")
    workload = SimWorkload(prompt_tokens=LengthDistribution.fixed(args.prompt_tokens),
                           output_tokens=LengthDistribution.fixed(args.output_tokens), requests=6 * n,
                           concurrency=args.concurrency)
    for text in filter(None, args.front_end_ms.split(",")):
        ms = float(text)
        front = FrontEnd(in_s=(ms / 1000,), first_out_s=(ms / 2000,), last_out_s=(ms / 2000,)) if ms else None
        ttft_s = simulate(server, workload, sizing.step_model, front).metrics["ttft_s"]
        print(f"front end {ms:g} ms: TTFT mean {ttft_s['mean'] * 1000:.1f}, p50 {ttft_s['p50'] * 1000:.1f}, "
              f"p90 {ttft_s['p90'] * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
