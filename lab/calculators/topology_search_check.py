"""How far the topology search's one-replica stand-ins lie from simulating every replica of both pools.

    python -m lab.calculators.topology_search_check [--gpu h100-sxm] [--model llama-3.1-8b] [--seconds 120]

For each case (prompt/output tokens, rate, topologies) it judges each topology twice over the same Poisson
window: as `servecap plan --search topology` does (`calculators.plan.topology_search`: replica 0's share, the
prefill latencies reused by place) and with every replica and worker simulated (`calculators.plan.topology.
simulate_topology`), and prints p99 TTFT and TPOT both ways, their ratio, and whether the verdicts agree.
"""

from __future__ import annotations

import argparse

import numpy as np

from calculators.gpu_engine import gpu_engine
from calculators.plan.fleet import ReplicaSpec
from calculators.plan.topology import KvLink, Topology, simulate_topology
from calculators.plan.topology_search import Window, _Searcher
from calculators.sim.workload import SimServer, SimWorkload
from contract.distributions import LengthDistribution
from contract.slo import SLO
from engine_core.gpus import get_gpu
from engine_core.models import resolve_model

CASES = ((8000, 200, 12.0, ("agg:6", "agg:8", "3p3d", "4p2d", "5p2d")),
         (2000, 500, 30.0, ("agg:4", "agg:6", "2p3d", "2p4d")),
         (200, 2000, 6.0, ("agg:2", "agg:3", "1p2d", "1p3d")))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", default="h100-sxm")
    p.add_argument("--model", default="llama-3.1-8b")
    p.add_argument("--seconds", type=float, default=120.0)
    p.add_argument("--slo-ttft-ms", type=float, default=1000.0)
    p.add_argument("--slo-tpot-ms", type=float, default=15.0)
    args = p.parse_args(argv)
    gpu = get_gpu(args.gpu)
    sizing = gpu_engine(resolve_model(args.model), gpu, max_model_len=8704)
    server = SimServer.from_flags("continuous", num_kv_blocks=sizing.num_kv_blocks, block_size=sizing.block_size,
                                  **sizing.defaults.limit_flags())
    replica = ReplicaSpec(server, sizing.step_model, sizing.num_kv_blocks, gpus=1, hourly_usd_per_gpu=gpu.hourly_usd)
    kv = KvLink(sizing.fit.kv_block_bytes / sizing.block_size, gpu.interconnect_bytes_per_s)
    slo = SLO(ttft_ms=args.slo_ttft_ms, tpot_ms=args.slo_tpot_ms)
    ratios, agree, total = {"ttft": [], "tpot": []}, 0, 0
    print(f"{'case':>16} {'topology':>8} {'TTFT p99 search':>16} {'full':>8} {'TPOT p99 search':>16} {'full':>8}  verdicts")
    for prompt, output, rate, names in CASES:
        rng = np.random.default_rng(7)
        t = np.cumsum(rng.exponential(1 / rate, int(rate * args.seconds)))
        t = t[t < args.seconds]
        window = Window(t, np.full(len(t), prompt), np.full(len(t), output), args.seconds)
        searcher = _Searcher(replica, window, slo, kv, 0.0)
        workload = SimWorkload(prompt_tokens=LengthDistribution.fixed(prompt),
                               output_tokens=LengthDistribution.fixed(output), arrival_times=tuple(t),
                               warmup_fraction=0.0)
        for name in names:
            topology = Topology.parse(name)
            found = searcher.evaluate(topology)
            full, _ = simulate_topology(server, workload, sizing.step_model, topology, kv=kv)
            ttft, tpot = full.metrics["ttft_s"]["p99"], full.metrics["tpot_s"]["p99"]
            full_meets = ttft <= slo.ttft_ms / 1e3 and tpot <= slo.tpot_ms / 1e3
            total += 1
            agree += full_meets == found.meets
            if found.ttft_p99_s is not None:
                ratios["ttft"].append(found.ttft_p99_s / ttft - 1)
                ratios["tpot"].append(found.tpot_p99_s / tpot - 1)
            print(f"{f'{prompt}/{output}@{rate:g}':>16} {name:>8} {_ms(found.ttft_p99_s):>16} {ttft * 1e3:>8.1f} "
                  f"{_ms(found.tpot_p99_s):>16} {tpot * 1e3:>8.2f}  {'same' if full_meets == found.meets else 'DIFFER'}")
    print(f"verdicts agree in {agree} of {total}; median |search / full - 1|: TTFT p99 "
          f"{np.median(np.abs(ratios['ttft'])):.1%}, TPOT p99 {np.median(np.abs(ratios['tpot'])):.1%}")
    return 0


def _ms(value) -> str:
    return "-" if value is None else f"{value * 1e3:.1f}"


if __name__ == "__main__":
    raise SystemExit(main())
