"""The flags `servecap plan` and `servecap fleet` share beyond the workload, the SLO and the engine's
(contract.workload, contract.slo, engine_core.options, declared once for every command): the demand's
shape, the fleet and faults, the SLO's windows, and the autoscaler's (its config's own fields); and what
they mean: the autoscaler, a fault, the demand to build. A bad value raises ValueError naming it."""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

from calculators.plan.autoscaler import AutoscalerConfig
from calculators.plan.fleet import Fault
from calculators.plan.resilience import ReplicaErrors, RouterResilience
from contract.faults import parse_replica_fault
from contract.options import add_options, options_from_args, parse_duration
from contract.slo import add_slo_arguments
from contract.workload import WorkloadSpec, add_workload_arguments
from engine_core.options import EngineOptions


def add_demand_flags(p: argparse.ArgumentParser) -> None:
    add_workload_arguments(p, title="workload (the demand's lengths; a --trace is a demand of its own)")
    demand = p.add_argument_group("demand (a --trace, or one of these)")
    demand.add_argument("--rate-curve", metavar="CSV", help="rows of t_s,rate_rps (a header line is allowed)")
    demand.add_argument("--diurnal", metavar="PEAK:TROUGH", help="a synthetic day: peak and trough requests/s")
    demand.add_argument("--horizon", help="how much of the demand to plan, after --speedup (10m, 24h; default: all "
                                          "of the trace or curve; the synthetic day: --period)")
    demand.add_argument("--sessions", type=int, default=0, help="rate curve / diurnal: users whose requests "
                                                                "share a prefix (multi-turn); 0: none")
    demand.add_argument("--session-prefix-tokens", type=int, default=0, help="tokens of each user's shared prefix")
    demand.add_argument("--period", type=float, default=86400.0, help="diurnal: seconds per day")
    demand.add_argument("--bursts-per-day", type=float, default=4.0)
    demand.add_argument("--burst-multiplier", type=float, default=2.0)
    demand.add_argument("--burst-duration", type=float, default=600.0, help="seconds per burst")


def add_replica_flags(p: argparse.ArgumentParser, title: str = "replica"):
    """What a replica is beyond its server (plan and fleet alike): the engine's --dtype and --tp (a catalog
    GPU's defaults, bf16 and 1), an MoE model's --dp and --expert-parallel, and its cold start; the group, for
    the command's own options."""
    add_options(p, EngineOptions, title=f"{title}: its engine", only=("dtype", "tp", "dp", "expert-parallel"),
                typed=True)
    p.set_defaults(dtype="bf16", tp=1)
    replica = p.add_argument_group(title)
    replica.add_argument("--cold-start-s", type=float,
                         help="seconds from asking for a replica to its being ready (plan: default the calibration "
                              "run's measured time to ready; fleet: at least its process's own; an emulated GPU "
                              "loads no weights: give a GPU replica's load time)")
    return replica


def add_scaling_flags(p: argparse.ArgumentParser, router_help: str) -> None:
    fleet = p.add_argument_group("router and fleet")
    fleet.add_argument("--router", default="round_robin", help=router_help)
    fleet.add_argument("--replicas", type=int, help="a fixed fleet of N (or the autoscaler's starting count)")
    fleet.add_argument("--kill", action="append", default=[], metavar="T[:ID]",
                       help="lose a replica at T seconds (ID, else the busiest); repeatable")
    fleet.add_argument("--replica-fault", action="append", default=[], metavar="ID:SPEC",
                       help="give replica ID a fault, its at= counted from the demand's start, e.g. "
                            "1:errors:status=503,at=60,for=30 (contract.faults; the plan models errors bursts, the "
                            "fleet any kind); repeatable")
    add_options(p, AutoscalerConfig, title="autoscaler (calculators.plan.autoscaler: HPA's rule)", typed=True)
    add_options(p, RouterResilience, title="the router's retries and circuit breakers (vllm-router's flags and "
                                           "defaults; calculators.plan.resilience)", typed=True)


def add_slo_flags(p: argparse.ArgumentParser) -> None:
    add_slo_arguments(p)
    windows = p.add_argument_group("SLO windows")
    windows.add_argument("--attainment", type=float, default=0.99, help="share of windows that must meet the SLO")
    windows.add_argument("--window-s", type=float, default=300.0, help="SLO window (default 5 minutes)")


def demand_workload(args) -> WorkloadSpec:
    """The workload options as the demand takes them (a dataset, multi-turn chats and classic models are a
    sweep's: a plan's users are --sessions, its closed-loop sessions a trace's or `--session`'s agents)."""
    workload = WorkloadSpec.from_args(args)
    refused = [flag for flag, given in (("--dataset", workload.dataset), ("--turns", workload.turns != 1),
                                        ("--scenario", workload.classic))
               if given]
    if refused:
        raise ValueError(f"{', '.join(refused)}: a plan's demand is a --trace, a --rate-curve or a --diurnal day of "
                         "chat requests (multi-turn users: --sessions; sessions whose turns wait on the answers: a "
                         "--trace of them, AIPerf's session_id and delay, or --session's agents started at the "
                         "curve's rate)")
    if workload.agentic and getattr(args, "sessions", 0):
        raise ValueError("--sessions gives single requests to users; --session's agents are sessions of their own: "
                         "give one of them")
    return workload


def chained_refusals(args, what: str, wait: str = "") -> None:
    """A demand whose turns wait on answers is planned on one pool: the flags that split it or move its
    requests between pools are refused, naming the first."""
    moved = [flag for flag, given in (("--canary-weight", getattr(args, "canary_weight", None)),
                                      ("--shadow-fraction", getattr(args, "shadow_fraction", None)),
                                      ("--fallback", getattr(args, "fallback", None)),
                                      ("--topology", getattr(args, "topology", None))) if given is not None]
    if moved:
        raise ValueError(f"{what}: its sessions' turns wait on the previous answer{wait}, and {moved[0]} splits the "
                         "demand or moves its requests between pools: a session's turns are planned on one pool "
                         "(leave the flag out)")


def check_shared_flags(args) -> None:
    """One demand, and positive times: what `servecap plan` and `servecap fleet` both refuse alike."""
    demand_kinds = [k for k in ("trace", "rate_curve", "diurnal") if getattr(args, k)]
    if len(demand_kinds) != 1:
        raise ValueError("give one demand: --trace PATH, --rate-curve CSV or --diurnal PEAK:TROUGH")
    demand_workload(args)   # the workload's own checks (--speedup > 0, ...)
    for flag, value in (("--window-s", args.window_s), ("--interval-s", args.interval_s)):
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"{flag} must be positive, got {value}")
    if args.horizon is not None and not parse_duration(args.horizon, "--horizon") > 0:
        raise ValueError(f"--horizon must be positive, got {args.horizon}")


def resilience_from_flags(args) -> RouterResilience:
    return RouterResilience(**options_from_args(RouterResilience, args))


def replica_faults_from_flags(args) -> tuple[tuple[int, object], ...]:
    """(replica id, contract.faults.Fault) per --replica-fault. In a fixed fleet (`--replicas N`) an id must be
    one it can have: 0 to N - 1, or a replacement's (each --kill starts one, numbered on from N)."""
    faults = tuple(parse_replica_fault(text) for text in args.replica_fault)
    if args.replicas is not None and args.min_replicas is None and args.max_replicas is None:
        ids = args.replicas + len(args.kill)
        for text, (rid, _) in zip(args.replica_fault, faults):
            if rid >= ids:
                raise ValueError(f"--replica-fault {text!r}: this fleet's replicas are 0 to {ids - 1} "
                                 f"({args.replicas} and {len(args.kill)} replacement(s))")
    return faults


def replica_errors_from_flags(args) -> tuple[ReplicaErrors, ...]:
    """The plan's error bursts from --replica-fault; another kind is refused (the plan does not model it)."""
    bursts = []
    for text, (rid, fault) in zip(args.replica_fault, replica_faults_from_flags(args)):
        if fault.kind != "errors":
            raise ValueError(f"--replica-fault {text!r}: the plan models error bursts (errors:status=S,...); a "
                             f"{fault.kind} replica is rehearsed by `servecap fleet` alone (a crash: --kill T:ID)")
        end = math.inf if fault.for_s is None else fault.at_s + fault.for_s
        bursts.append(ReplicaErrors(rid, fault.at_s, end, fault.status, fault.rate))
    return tuple(bursts)


def autoscaler_from_flags(args) -> AutoscalerConfig | None:
    if args.min_replicas is None and args.max_replicas is None:
        if args.target is not None:
            raise ValueError("--target is the autoscaler's: give --min-replicas and --max-replicas too")
        return None
    if args.min_replicas is None or args.max_replicas is None:
        raise ValueError("autoscaling needs both --min-replicas and --max-replicas")
    if args.min_replicas > args.max_replicas:
        raise ValueError(f"--min-replicas {args.min_replicas} is above --max-replicas {args.max_replicas}")
    if args.target is None:
        raise ValueError("autoscaling needs --target (the metric's value per replica to aim at)")
    return AutoscalerConfig(**options_from_args(AutoscalerConfig, args))


def fault_from_flag(spec: str) -> Fault:
    when, _, rid = spec.partition(":")
    try:
        t = float(when)
        replica = int(rid) if rid else None
    except ValueError:
        raise ValueError(f"--kill {spec!r}: expected T[:ID], seconds and a replica id") from None
    if not (t >= 0 and math.isfinite(t)):
        raise ValueError(f"--kill {spec!r}: the time must be seconds >= 0")
    return Fault(t, replica)


def demand_spec_from_flags(args) -> dict:
    """What to build the demand from (read here: files; built by servecap.plan.run)."""
    workload = demand_workload(args)
    horizon = parse_duration(args.horizon, "--horizon") if args.horizon is not None else None
    spec = {"speedup": workload.trace_speedup, "duration_s": horizon, "seed": workload.seed}
    if workload.trace:
        from loadgen.workload.traces import load_trace

        trace = load_trace(workload.trace)
        if trace.chained:
            chained_refusals(args, f"--trace {workload.trace}", " (\"delay\")")
        spec.update(kind="trace", trace=trace)
        return spec
    if workload.agentic:
        chained_refusals(args, f"--session {workload.session}")
        spec.update(session=workload.session_spec, think_time_s=workload.think_time_s)
    lengths = {"prompt": workload.prompt_lengths, "output": workload.output_lengths,
               "sessions": args.sessions, "prefix_tokens": args.session_prefix_tokens}
    if args.sessions < 0 or args.session_prefix_tokens < 0:
        raise ValueError("--sessions and --session-prefix-tokens must be >= 0")
    if args.rate_curve:
        spec.update(kind="rate_curve", curve=read_rate_curve(Path(args.rate_curve)), source=args.rate_curve, **lengths)
        return spec
    peak, _, trough = args.diurnal.partition(":")
    try:
        peak_rps, trough_rps = float(peak), float(trough)
    except ValueError:
        raise ValueError(f"--diurnal {args.diurnal!r}: expected PEAK:TROUGH requests/s, e.g. 40:5") from None
    spec.update(kind="diurnal", peak_rps=peak_rps, trough_rps=trough_rps, period_s=args.period,
                bursts_per_day=args.bursts_per_day, burst_multiplier=args.burst_multiplier,
                burst_duration_s=args.burst_duration, **lengths)
    return spec


def read_rate_curve(path: Path) -> tuple[list[float], list[float]]:
    """t_s,rate_rps rows; a first line that is not numbers is a header."""
    try:
        rows = list(csv.reader(path.read_text().splitlines()))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--rate-curve {str(path)!r} cannot be read: {exc}") from None
    times, rates = [], []
    for number, row in enumerate(rows, 1):
        if not row or not "".join(row).strip():
            continue
        try:
            t, rate = float(row[0]), float(row[1])
        except (ValueError, IndexError):
            if number == 1:
                continue   # a header
            raise ValueError(f"--rate-curve {str(path)!r} line {number}: expected t_s,rate_rps, got {row!r}") from None
        times.append(t)
        rates.append(rate)
    if not times:
        raise ValueError(f"--rate-curve {str(path)!r} has no rows")
    return times, rates
