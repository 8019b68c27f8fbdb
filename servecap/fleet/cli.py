"""`servecap fleet`: the plan run for real: replicas behind vLLM's router, the plan's autoscaler rule
and faults acted out, the demand replayed open loop by Locust through the router.

    servecap fleet --emulate l4 --model llama-3.1-8b --trace day.jsonl --speedup 60 --router cache_aware \\
        --min-replicas 1 --max-replicas 4 --target 16 --interval-s 5 --down-window-s 30 --cold-start-s 20 \\
        --kill 300 --slo-ttft-ms 2000 --window-s 60 --out runs/fleet
    servecap fleet --server-cmd "vllm serve ./ckpt --port {port}" --ready-path /health --rate-curve day.csv \\
        --replicas 2 --slo-e2e-ms 20000

Replicas are emulated-GPU reference servers (`--emulate GPU --model M`: each step waits what that GPU
would take; no forward pass) or any command with `{port}` (`--server-cmd`). Each reference replica
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
from pathlib import Path

from rich.console import Console

from contract.options import CommandParser, add_output_arguments, out_dir
from contract.config_file import add_config_option, parse_command_line
from servecap.experiment.run_options import add_run_arguments
from servecap.experiment.targets import add_target_arguments
from servecap.fleet.router import POLICIES
from servecap.plan.second_pool import add_second_pool_flags
from servecap.plan.flags import add_demand_flags, add_replica_flags, add_scaling_flags, add_slo_flags
from servecap.plan.topology import add_pools_flags, pools_topology


def _parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="servecap fleet", description=__doc__.split("\n\n")[0],
                      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    add_config_option(p)
    add_output_arguments(p)
    add_demand_flags(p)
    add_target_arguments(p, title="replicas (--emulate GPU with a catalog --model, or --server-cmd)",
                         strategies=False)
    add_replica_flags(p)
    add_scaling_flags(p, f"vllm-router's --policy: {', '.join(POLICIES)}")
    add_slo_flags(p)
    add_pools_flags(p)
    add_second_pool_flags(p)
    add_run_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parse_command_line(parser, sys.argv[1:] if argv is None else argv)
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
    import json

    from servecap.fleet.run import FLEET_FILE

    fleet = json.loads((out / FLEET_FILE).read_text())
    counts = fleet["accounting"]
    statuses = ", ".join(f"{n} {status}" for status, n in counts["by_status"].items())
    console.print(f"fleet: {counts['sent']} requests sent: {statuses}"
                  + (f"; {counts['cancelled_copies']} hedge copies cancelled" if counts["cancelled_copies"] else "")
                  + (f"; {counts['missing']} NOT ACCOUNTED FOR" if counts["missing"] else ""))
    hedge = fleet.get("hedging")
    if hedge:
        console.print(f"fleet: hedging after {hedge['after']}: {hedge['hedged']} of {hedge['requests']} requests sent "
                      f"twice (+{hedge['extra_requests']:.1%}), {hedge['copies_kept']} answered by the copy")
    shadow = fleet.get("shadow")
    if shadow:
        p99 = shadow["ttft_p99_s"]
        console.print(f"fleet: shadow: {shadow['mirrored']} copies of {shadow['production_requests']} requests finished "
                      f"by its engines ({shadow['fraction']:.0%} mirrored), TTFT p99 "
                      f"{'n/a' if p99 is None else f'{p99 * 1e3:,.0f} ms'} on its engines' clock")
    for version, part in (fleet.get("canary") or {}).items():
        if version in ("primary", "canary"):
            attained = "no window" if part["attainment"] is None else f"{part['attainment']:.1%} of windows"
            p99 = part["ttft_p99_s"]
            console.print(f"fleet: {version}: {part['requests']} requests ({part['share']:.1%}), {attained} meet the "
                          f"SLO, TTFT p99 {'n/a' if p99 is None else f'{p99 * 1e3:,.0f} ms'}")
    fallback = fleet.get("fallback")
    for tier, part in ((fallback or {}).get("tiers") or {}).items():
        p99 = part["ttft_p99_s"]
        console.print(f"fleet: {tier} answered {part['requests']} requests ({part['share']:.1%}), TTFT p99 "
                      f"{'n/a' if p99 is None else f'{p99 * 1e3:,.0f} ms'}"
                      + (f"; {fallback['left_errors']} after the primary's error" if tier == "fallback" else ""))
    console.print(f"fleet: run directory {out} (fleet.json, fleet_timeline.csv)")
    if args.no_report:
        return 0
    from reports import cli as report_cli
    from reports.cli import ReportOptions

    from contract.slo import slo_from_args

    return report_cli.report(out, ReportOptions(slo=slo_from_args(args)))


def _plan(args):
    from calculators.plan.outcome import PlanSlo
    from contract.slo import slo_from_args
    from servecap.plan.flags import (autoscaler_from_flags, check_shared_flags, fault_from_flag,
                                     replica_faults_from_flags)

    if args.router not in POLICIES:
        raise ValueError(f"--router {args.router!r}: unknown policy; vllm-router's are {', '.join(POLICIES)}")
    if args.url:
        raise ValueError("--url: a fleet starts its own replicas (--emulate GPU --model M, or --server-cmd)")
    if (args.emulate is None) == (args.server_cmd is None):
        raise ValueError("give one kind of replica: --emulate GPU --model M, or --server-cmd 'CMD ... {port}'")
    if args.cold_start_s is None:
        args.cold_start_s = 0.0
    if not (args.cold_start_s >= 0):
        raise ValueError(f"--cold-start-s must be seconds >= 0, got {args.cold_start_s}")
    check_shared_flags(args)
    slo = PlanSlo(slo_from_args(args), attainment=args.attainment)
    second = _second_pool(args)
    if args.topology is not None:
        return _disaggregated(args, slo)
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
    replica_faults = replica_faults_from_flags(args)
    if replica_faults and args.server_cmd is not None:
        raise ValueError("--replica-fault is set through the reference server's POST /admin/faults: give "
                         "--emulate GPU replicas, not --server-cmd")
    launch, describe = _launch(args)
    return _spec(args, slo, launch=launch, describe_replica=describe,
                 model=args.served_model or (args.model if args.emulate else None), initial_replicas=initial,
                 autoscaler=autoscaler, faults=faults, replica_faults=replica_faults, **second)


def _second_pool(args) -> dict:
    """--canary-weight, --shadow-fraction or --fallback: the second pool's emulated replicas (the primary's unless
    --KIND-gpu, --KIND-model, --KIND-dtype or --KIND-tp say what changed), behind a router of its own and
    nginx (a weighted split, or a mirror); {} without one."""
    from calculators.plan.fallback import FallbackRule
    from servecap.fleet.canary import CanaryFleet
    from servecap.fleet.fallback import FallbackFleet
    from servecap.fleet.shadow import ShadowFleet
    from servecap.plan.second_pool import MAIN_FLAGS, kind_from_flags, schedule_from_flags
    from calculators.plan.shadow import check_fraction

    kind = kind_from_flags(args)
    if kind is None:
        return {}
    main = "--" + MAIN_FLAGS[kind].replace("_", "-")
    schedule = schedule_from_flags(args) if kind == "canary" else None
    fraction = check_fraction(args.shadow_fraction) if kind == "shadow" else None
    rule = FallbackRule.parse(args.fallback) if kind == "fallback" else None
    if rule is not None and args.hedge_after:
        raise ValueError("--fallback with --hedge-after: a hedge's copy would go through the fallback's proxy too")
    for flag, given in (("--topology", args.topology is not None), ("--server-cmd", args.server_cmd is not None),
                        (f"--{kind}-calibration", getattr(args, f"{kind}_calibration") is not None)):
        if given:
            raise ValueError(f"{main} with {flag}: a fleet's {kind} is emulated replicas (--emulate, --{kind}-gpu/"
                             f"--{kind}-model/--{kind}-dtype/--{kind}-tp) behind one aggregated pool")
    from servecap.fleet.split_proxy import NGINX

    if not Path(NGINX).exists():
        raise ValueError(f"{main}: the {kind} runs behind Debian's nginx, which is not installed (apt-get install nginx)")
    launch, describe = _launch(args, emulate=getattr(args, f"{kind}_gpu"), model=getattr(args, f"{kind}_model"),
                               dtype=getattr(args, f"{kind}_dtype"), tp=getattr(args, f"{kind}_tp"))
    served = ("--served-model-name", args.served_model or args.model)   # a new version under the model name clients send
    replicas = getattr(args, f"{kind}_replicas")
    if kind == "fallback":
        return {"fallback": FallbackFleet(launch=lambda name: launch(name, served), describe=describe,
                                          replicas=replicas, rule=rule)}
    if kind == "canary":
        return {"canary": CanaryFleet(launch=lambda name: launch(name, served), describe=describe, replicas=replicas,
                                      schedule=schedule)}
    return {"shadow": ShadowFleet(launch=lambda name: launch(name, served), describe=describe, replicas=replicas,
                                  fraction=fraction)}


def _spec(args, slo, **fleet):
    """The FleetSpec of the flags' demand, router (its retries and breakers too), SLO, output and run options,
    with `fleet`'s replicas."""
    from servecap.experiment.run_options import RunOptions
    from servecap.fleet.run import FleetSpec
    from servecap.plan.flags import demand_spec_from_flags, demand_workload, resilience_from_flags
    from servecap.plan.run import build_demand

    return FleetSpec(demand=build_demand(demand_spec_from_flags(args)), router=args.router,
                     resilience=resilience_from_flags(args),
                     cold_start_s=args.cold_start_s, slo=slo, window_s=args.window_s,
                     out=Path(out_dir(args, "fleet")), workload=demand_workload(args),
                     options=RunOptions.from_args(args, observe_server=False), **fleet)


def _disaggregated(args, slo):
    """`--topology PpDd`: emulated workers `r0`..`r{P-1}` prefill (`--role prefill`), the rest decode, behind
    `vllm-router --vllm-pd-disaggregation`; fixed pools, as `servecap plan --topology` plans them, each
    `--kill T:ID` killing the worker it names (not replaced)."""
    from calculators.plan.disaggregated import kills
    from servecap.plan.flags import fault_from_flag

    topology = pools_topology(args, "runs fixed pools of emulated workers behind a round-robin PD router",
                              (("--server-cmd", args.server_cmd is not None),))
    faults = tuple(fault_from_flag(spec) for spec in args.kill)
    kills(topology, faults)   # each names its worker, once
    launch, describe = _launch(args)
    link = [] if args.kv_transfer_gbs is None else ["--kv-transfer-gbs", str(args.kv_transfer_gbs)]
    link += ["--kv-transfer-latency-us", str(args.kv_transfer_latency_us)] if args.kv_transfer_latency_us else []

    def worker(name: str):
        role = ["--role", "prefill"] if int(name.removeprefix("r")) < topology.prefill else ["--role", "decode", *link]
        return launch(name, role)

    return _spec(args, slo, launch=worker, describe_replica=f"{topology}: {describe}", model=args.model,
                 initial_replicas=topology.workers, autoscaler=None, faults=faults, disaggregated=topology)


def _launch(args, **replica):
    """name -> a launch spec, and the replica in words; `replica`: emulate, model, dtype, tp where they differ
    from the flags' (None: the flags')."""
    if args.server_cmd is not None:
        from servecap.launch.command import CommandSpec

        argv = tuple(shlex.split(args.server_cmd))
        ready = args.ready_path
        CommandSpec(argv, ready_path=ready)   # a bad command fails here, naming the problem
        return (lambda name: CommandSpec(argv, ready_path=ready)), args.server_cmd
    from reference_server.cli import build_parser, configs_from_args
    from servecap.launch.spec import ReferenceServerSpec

    emulate, model, dtype, tp = (replica.get(k) or getattr(args, k) for k in ("emulate", "model", "dtype", "tp"))
    layout = ["--dp", str(args.dp)] if (args.dp or 1) > 1 else []
    layout += ["--expert-parallel"] if args.expert_parallel else []
    flags = ["--emulate", emulate, "--model", model, "--dtype", dtype, "--tp", str(tp), *layout,
             "--engine-mode", "thread", "--no-classifier", *shlex.split(args.server_args)]
    try:
        configs_from_args(build_parser().parse_args(flags))   # a bad replica fails before anything starts
    except SystemExit:
        raise ValueError(f"the replica's flags are not valid `servecap serve` flags: {' '.join(flags)}") from None
    describe = f"emulated {emulate} (EMULATED GPU: no forward pass), {model} {dtype} tp={tp}" + (
        f" dp={args.dp}" if (args.dp or 1) > 1 else "") + (" expert-parallel" if args.expert_parallel else "")
    return (lambda name, more=(): ReferenceServerSpec.from_flags([*flags, *more, "--replica-name", name])), describe


if __name__ == "__main__":
    raise SystemExit(main())
