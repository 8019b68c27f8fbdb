"""`servecap plan --search topology --gpu-budget N`: aggregated or disaggregated, and how many of each, for the
demand's busiest SLO window (`calculators.plan.topology_search`). Only that question: no day is simulated.

    servecap plan --gpu h100-sxm --model llama-3.1-8b --diurnal 40:5 --duration 86400 --search topology \\
        --gpu-budget 64 --slo-ttft-ms 1000 --slo-tpot-ms 15
"""

from __future__ import annotations

import argparse

import numpy as np

from contract.disaggregation import add_kv_link_arguments, add_pd_hop_argument, add_topology_argument


def add_pools_flags(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """--topology and the KV link: what `servecap plan` and `servecap fleet` both take for fixed PD pools."""
    g = p.add_argument_group("disaggregated prefill/decode: fixed pools (--topology PpDd)")
    add_topology_argument(g, "fixed pools of P prefill and D decode workers behind vLLM's PD router (round robin in "
                             "each), e.g. 2p1d, instead of --replicas / an autoscaler")
    add_kv_link_arguments(g)
    return g


def add_topology_flags(p: argparse.ArgumentParser) -> None:
    """The plan's: the fixed pools' flags, the search's budget and the hop a simulation adds."""
    g = add_pools_flags(p)
    g.add_argument("--gpu-budget", type=int, default=None, metavar="N",
                   help="--search topology: the most GPUs a topology may use (each worker holds --tp GPUs)")
    add_pd_hop_argument(g)


def gpu_worker(args):
    """(the catalog GPU worker, sized as its engine would size it; the KV link between workers) from the flags."""
    from calculators.gpu_engine import gpu_engine
    from calculators.plan.sizing import gpu_replica
    from calculators.plan.topology import kv_link_for
    from engine_core.gpus import get_gpu
    from engine_core.models import resolve_model

    if (args.dp or 1) > 1 or args.expert_parallel:
        raise ValueError("--dp/--expert-parallel with --search topology: the search sizes tensor-parallel workers")
    if not (args.pd_hop_ms >= 0):
        raise ValueError(f"--pd-hop-ms must be >= 0, got {args.pd_hop_ms}")
    engine_version = getattr(args, "engine_version", None)
    replica = gpu_replica(args.gpu, args.model, dtype=args.dtype, tp=args.tp, engine=args.engine,
                          engine_version=engine_version, max_model_len=args.max_model_len)
    sizing = gpu_engine(resolve_model(args.model), get_gpu(args.gpu), dtype=args.dtype, tp=args.tp,
                        engine=args.engine, engine_version=engine_version, max_model_len=args.max_model_len)
    return replica, kv_link_for(get_gpu(args.gpu), sizing, args.kv_transfer_gbs, args.kv_transfer_latency_us)


def pools_topology(args, what: str, more: tuple[tuple[str, bool], ...] = ()):
    """--topology PpDd as plan and fleet take it: a disaggregated Topology, or a ValueError naming what
    does not go with fixed pools (`what`: the command's words for them; `more`: its own (flag, given))."""
    from calculators.plan.topology import Topology

    topology = Topology.parse(args.topology)
    if not topology.disaggregated:
        raise ValueError(f"--topology {args.topology}: an aggregated fleet is --replicas N; --topology takes PpDd")
    clashing = [flag for flag, given in (("--replicas", args.replicas is not None),
                                         ("--min-replicas/--max-replicas", args.min_replicas is not None
                                          or args.max_replicas is not None),
                                         ("--replica-fault", bool(args.replica_fault)),
                                         (f"--router {args.router}", args.router != "round_robin"),
                                         ("--dp/--expert-parallel", (args.dp or 1) > 1 or args.expert_parallel), *more)
                if given]
    if clashing:
        raise ValueError(f"--topology {what}: {', '.join(clashing)} not with it")
    return topology


def disaggregated_config(args, seed: int):
    """`servecap plan --topology PpDd`: the plan's fixed pools (a FleetConfig)."""
    from calculators.plan.fleet import FleetConfig
    from servecap.plan.flags import fault_from_flag

    topology = pools_topology(args, "plans fixed prefill and decode pools behind a round-robin PD router",
                              (("--search", args.search != "none"), ("--calibration", bool(args.calibration))))
    if args.gpu is None or not args.model:
        raise ValueError("--topology sizes catalog GPU workers: give --gpu and --model")
    replica, kv = gpu_worker(args)
    return FleetConfig(replica=replica, router=args.router, initial_replicas=topology.workers,
                       cold_start_s=args.cold_start_s or 0.0, seed=seed, disaggregated=topology, kv=kv,
                       pd_hop_s=args.pd_hop_ms / 1e3, faults=tuple(fault_from_flag(spec) for spec in args.kill),
                       retry_lost=args.retry_lost)   # FleetConfig refuses a kill that names no worker


def busiest_window(demand, window_s: float):
    """The demand's SLO window with the most requests, its sends from the window's start."""
    from calculators.plan.topology_search import Window

    t = np.asarray(demand.t_s)
    starts = np.arange(0.0, max(float(demand.span_s), window_s), window_s)
    counts = np.searchsorted(t, starts + window_s, side="left") - np.searchsorted(t, starts, side="left")
    start = float(starts[int(np.argmax(counts))])
    inside = (t >= start) & (t < start + window_s)
    return Window(t[inside] - start, np.asarray(demand.prompt)[inside], np.asarray(demand.output)[inside],
                  min(window_s, float(demand.span_s) - start) if demand.span_s > start else window_s)


def run_topology_search(args, demand, progress) -> dict:
    """The search's answer as plan.json's `topology` (and the lines the terminal shows)."""
    from calculators.plan.topology_search import search_topologies
    from contract.slo import slo_from_args

    if args.gpu is None or not args.model:
        raise ValueError("--search topology sizes catalog GPU workers: give --gpu and --model")
    if args.gpu_budget is None or args.gpu_budget < 1:
        raise ValueError("--search topology needs --gpu-budget N (N >= 1 GPUs)")
    replica, kv = gpu_worker(args)
    window = busiest_window(demand, args.window_s)
    progress(f"the busiest {args.window_s:g} s window: {len(window.t_s):,} requests ({window.rate_rps:.3g} req/s); "
             f"searching topologies within {args.gpu_budget} GPUs")
    result = search_topologies(replica, window, slo_from_args(args), gpu_budget=args.gpu_budget, kv=kv,
                               hop_s=args.pd_hop_ms / 1e3)
    notes = list(result.notes)
    return {"replica": replica.describe, "gpus_per_worker": replica.gpus, "window_s": args.window_s,
            "requests_in_window": int(len(window.t_s)), "pd_hop_ms": args.pd_hop_ms,
            "kv_transfer_gbs": None if kv is None else kv.link_bytes_per_s / 1e9,
            **result.to_dict(), "notes": notes}


def topology_lines(answer: dict) -> list[str]:
    rows = [f"{'topology':>9} {'GPUs':>5} {'tok/s/GPU':>10} {'tok/s/user':>10} {'TTFT p99 ms':>12} "
            f"{'TPOT p99 ms':>12} {'$/M tok':>8}"]
    for c in answer["pareto"]:
        rows.append(f"{c['topology']:>9} {c['gpus']:>5} {c['tokens_per_s_per_gpu']:>10.1f} "
                    f"{_num(c['tokens_per_s_per_user'], 10, 1)} {_num(c['ttft_p99_s'], 12, 1, 1e3)} "
                    f"{_num(c['tpot_p99_s'], 12, 2, 1e3)} {_num(c['usd_per_million_tokens'], 8, 3)}")
    return [f"Topologies for {answer['replica']} at {answer['rate_rps']:.3g} req/s (the busiest "
            f"{answer['window_s']:g} s window), {answer['gpu_budget']} GPUs at most; {answer['evaluations']} "
            "candidates simulated", "Pareto front (tokens/s a GPU against tokens/s a user), meeting the SLO:",
            *rows, answer["answer"], *answer["notes"]]


def _num(value, width: int, digits: int, scale: float = 1.0) -> str:
    return f"{'-':>{width}}" if value is None else f"{value * scale:>{width}.{digits}f}"
