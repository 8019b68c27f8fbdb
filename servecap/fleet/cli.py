"""`servecap fleet`: the plan run for real: replicas behind vLLM's router, the plan's autoscaler rule
and faults acted out, the demand replayed open loop by Locust through the router.

    servecap fleet --emulate l4 --model llama-3.1-8b --trace day.jsonl --speedup 60 --router cache_aware \\
        --min-replicas 1 --max-replicas 4 --target 16 --interval-s 5 --down-window-s 30 --cold-start-s 20 \\
        --kill 300 --slo-ttft-ms 2000 --window-s 60 --out runs/fleet
    servecap fleet --replica-cmd "vllm serve ./ckpt --port {port}" --ready-path /health --rate-curve day.csv \\
        --replicas 2 --slo-e2e-ms 20000

Replicas are emulated-GPU reference servers (`--emulate GPU --model M`: each step waits what that GPU
would take; no forward pass) or any command with `{port}` (`--replica-cmd`). Each reference replica
names itself in the `x-servecap-replica` response header, so every record says which replica served
it. The same demand, scaling and fault flags as `servecap plan`, so `servecap plan` with the same
flags (and `--gpu` for `--emulate`) predicts this run. The run directory is a sweep's, plus
demand.jsonl, fleet_timeline.csv and fleet.json (the replicas' lives, the autoscaler's decisions,
the run judged per SLO window by the plan's rule); the report is the sweep's.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from rich.console import Console

from servecap.fleet.router import POLICIES
from servecap.plan.flags import add_demand_flags, add_scaling_flags, add_slo_flags


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="servecap fleet", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    add_demand_flags(p)
    replica = p.add_argument_group("replicas (choose one)")
    replica.add_argument("--emulate", metavar="GPU", help="emulated-GPU reference servers of this catalog GPU")
    replica.add_argument("--model", help="--emulate: a catalog model")
    replica.add_argument("--dtype", default="bf16")
    replica.add_argument("--tp", type=int, default=1)
    replica.add_argument("--server-args", default="", help="more `servecap serve` flags for each replica")
    replica.add_argument("--replica-cmd", help="any server command with {port} (e.g. vllm serve ... --port {port})")
    replica.add_argument("--ready-path", default="/health", help="--replica-cmd: ready when this answers 200")
    replica.add_argument("--cold-start-s", type=float, default=0.0,
                         help="seconds from asking for a replica to its joining the router, at least (an emulated "
                              "GPU loads no weights: give a GPU replica's load time; default: its process's own)")
    add_scaling_flags(p, f"vllm-router's --policy: {', '.join(POLICIES)}")
    add_slo_flags(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="run directory (default runs/fleet-TIME)")
    p.add_argument("--no-report", action="store_true", help="skip the sweep's report at the end")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    console = Console(stderr=True, soft_wrap=True, highlight=False)
    try:
        plan = _plan(args)
    except (ValueError, OSError) as exc:
        parser.exit(2, f"servecap fleet: error: {exc}\n")
    from servecap.fleet.run import run_fleet
    from servecap.launch.process import ServerStartError

    try:
        out = run_fleet(plan, console)
    except (ValueError, ServerStartError) as exc:
        print(f"servecap fleet: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    console.print(f"fleet: run directory {out} (fleet.json, fleet_timeline.csv)")
    if args.no_report:
        return 0
    from reports import cli as report_cli
    from reports.cli import ReportOptions

    return report_cli.report(out, ReportOptions(slo_ttft_ms=args.slo_ttft_ms, slo_tpot_ms=args.slo_tpot_ms,
                                                slo_e2e_ms=args.slo_e2e_ms))


def _plan(args):
    from calculators.plan.outcome import PlanSlo
    from contract.slo import SLO
    from servecap.plan.flags import (autoscaler_from_flags, check_shared_flags, demand_spec_from_flags,
                                     fault_from_flag)
    from servecap.plan.run import build_demand

    if args.router not in POLICIES:
        raise ValueError(f"--router {args.router!r}: unknown policy; vllm-router's are {', '.join(POLICIES)}")
    if (args.emulate is None) == (args.replica_cmd is None):
        raise ValueError("give one kind of replica: --emulate GPU --model M, or --replica-cmd 'CMD ... {port}'")
    if args.emulate is not None and not args.model:
        raise ValueError("--emulate needs --model (a catalog model)")
    if not (args.cold_start_s >= 0):
        raise ValueError(f"--cold-start-s must be seconds >= 0, got {args.cold_start_s}")
    check_shared_flags(args)
    slo = PlanSlo(SLO(ttft_ms=args.slo_ttft_ms, tpot_ms=args.slo_tpot_ms, e2e_ms=args.slo_e2e_ms),
                  attainment=args.attainment)
    autoscaler = autoscaler_from_flags(args)
    if autoscaler is None and args.replicas is None:
        raise ValueError("give --replicas N (a fixed fleet) or --min-replicas/--max-replicas (autoscaled)")
    if autoscaler is not None and autoscaler.min_replicas < 1:
        raise ValueError("--min-replicas must be at least 1 for a real fleet: vllm-router holds no request while "
                         "it has no worker, so scaling from zero is the plan's alone")
    initial = args.replicas if args.replicas is not None else autoscaler.min_replicas
    if initial < 1:
        raise ValueError(f"--replicas must be at least 1, got {initial}")
    faults = tuple(fault_from_flag(spec) for spec in args.kill)
    launch, describe = _launch(args)
    demand = build_demand(demand_spec_from_flags(args))
    if not len(demand):
        raise ValueError("the demand has no requests (a trace cut to nothing, or a rate curve of zero)")
    from servecap.fleet.run import FleetPlan

    return FleetPlan(demand=demand, launch=launch, describe_replica=describe, model=args.model,
                     router=args.router, initial_replicas=initial, cold_start_s=args.cold_start_s,
                     autoscaler=autoscaler, faults=faults, slo=slo, window_s=args.window_s,
                     out=Path(args.out or f"runs/fleet-{time.strftime('%Y%m%d-%H%M%S')}"), seed=args.seed)


def _launch(args):
    """name -> a launch spec, and the replica in words."""
    if args.replica_cmd is not None:
        from servecap.launch.command import CommandSpec

        argv = tuple(shlex.split(args.replica_cmd))
        CommandSpec(argv, ready_path=args.ready_path)   # a bad command fails here, naming the problem
        return (lambda name: CommandSpec(argv, ready_path=args.ready_path)), args.replica_cmd
    from reference_server.cli import build_parser, configs_from_args
    from servecap.launch.spec import ReferenceServerSpec

    flags = ["--emulate", args.emulate, "--model", args.model, "--dtype", args.dtype, "--tp", str(args.tp),
             "--engine-mode", "thread", "--no-classifier", *shlex.split(args.server_args)]
    try:
        configs_from_args(build_parser().parse_args(flags))   # a bad replica fails before anything starts
    except SystemExit:
        raise ValueError(f"the replica's flags are not valid `servecap serve` flags: {' '.join(flags)}") from None
    describe = f"emulated {args.emulate} (EMULATED GPU: no forward pass), {args.model} {args.dtype} tp={args.tp}"
    return (lambda name: ReferenceServerSpec.from_flags([*flags, "--replica-name", name])), describe


if __name__ == "__main__":
    raise SystemExit(main())
