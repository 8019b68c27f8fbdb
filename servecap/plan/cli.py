"""`servecap plan`: a fleet over a day of traffic that moves, simulated: how many replicas, when, what
share of each window meets the p99 SLO, what it costs, and what losing one replica at the peak does.

    servecap plan --gpu h100-sxm --model llama-3.1-8b --trace azure.csv --speedup 1 --router round_robin \\
        --min-replicas 1 --max-replicas 16 --target 64 --cold-start-s 120 --slo-ttft-ms 500 --slo-e2e-ms 20000
    servecap plan --calibration runs/cmp --strategy continuous --rate-curve day.csv --prompt-tokens 512 \\
        --output-tokens 128 --replicas 3 --cold-start-s 3 --slo-ttft-ms 200
    servecap plan --gpu h100-sxm --model llama-3.1-8b --diurnal 40:5 --duration 86400 --bursts-per-day 6 ...

No server runs: each replica is the simulator's engine (the strategy's real scheduler and block
manager, a step-time model) on one shared clock, behind a model of vLLM's router's policy and an
HPA-style autoscaler. Writes OUT/plan.json, OUT/plan.png and OUT/plan.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from calculators.efficiency_profile import EfficiencyOptions
from calculators.plan.fleet import FleetConfig, ReplicaSpec
from calculators.plan.outcome import PlanSlo
from contract.hedging import add_hedge_arguments
from contract.slo import slo_from_args
from calculators.plan.router import ROUTER_POLICIES
from contract.options import CommandParser, add_options, add_output_arguments, out_dir
from contract.config_file import add_config_option, parse_command_line
from engine_core.gpus import GpuOptions
from engine_core.options import EngineOptions
from reports.predict.options import CalibrationOptions
from servecap.plan.flags import (add_demand_flags, add_replica_flags, add_scaling_flags, add_slo_flags,
                                 autoscaler_from_flags, check_shared_flags, demand_spec_from_flags, demand_workload,
                                 fault_from_flag, replica_errors_from_flags, resilience_from_flags)
from servecap.plan.front_end import add_front_end_flag, measured_front_end
from servecap.plan.second_pool import add_second_pool_flags, second_pool_from_flags
from servecap.plan.output import write_outputs
from servecap.plan.topology import add_topology_flags, disaggregated_config


def _parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="servecap plan", description=__doc__.split("\n\n")[0],
                      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    add_config_option(p)
    add_output_arguments(p, report=False, json="print plan.json")
    add_demand_flags(p)
    add_replica_flags(p, title="replica (choose one: --gpu with --model, or --calibration)")
    add_options(p, GpuOptions, title="replica on a catalog GPU, sized as its engine would (with --model)",
                only=("gpu",), typed=True)
    add_options(p, EngineOptions, only=("model", "max-model-len"), typed=True)
    add_options(p, EfficiencyOptions, only=("engine", "engine-version"), typed=True)
    add_options(p, CalibrationOptions, title="replica calibrated on a measured run (as predict's)",
                only=("calibration", "replications"), typed=True)
    add_options(p, EngineOptions, only=("strategy", "max-loras"), typed=True)
    add_front_end_flag(p)
    add_scaling_flags(p, f"one of {', '.join(ROUTER_POLICIES)}")
    add_slo_flags(p)
    p.add_argument("--retry-lost", action="store_true",
                   help="a killed replica's requests are sent again (a client that retries); default: they fail, "
                        "as behind vLLM's router, which does not retry a response already streaming")
    p.add_argument("--search", choices=("none", "target", "topology"), default="none",
                   help="target: the cheapest autoscaler target that meets the attainment (a grid around --target); "
                        "topology: aggregated or disaggregated prefill/decode, and how many of each, for the busiest "
                        "window within --gpu-budget (only that: no day is simulated)")
    p.add_argument("--static-max", type=int, default=64, help="the most replicas the static-fleet search tries")
    p.add_argument("--no-n-plus-one", action="store_true", help="skip the run with a replica lost at the peak")
    add_topology_flags(p)
    add_second_pool_flags(p)
    add_hedge_arguments(p.add_argument_group("hedging (the load generator's, simulated: contract/hedging.py)"),
                        only=("hedge-after",))
    p.set_defaults(engine="vllm", replications=1)   # plan's: vLLM's sizing and factors, one seeded run
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parse_command_line(parser, sys.argv[1:] if argv is None else argv)
    console = Console(stderr=True, soft_wrap=True, highlight=False)
    if args.search == "topology":
        return _topology_search(parser, args, console)
    try:
        inputs = _inputs(args)
        from servecap.plan.run import build_demand, run_plan   # numpy and the simulator: once the flags are good

        inputs["demand"] = build_demand(inputs["demand_spec"])
        second = inputs["second"]
        if second is not None and second.kind == "canary":
            from calculators.plan.canary import check_split

            check_split(inputs["demand"], second.schedule, inputs["config"].seed)
        if inputs["config"].disaggregated is not None:
            from calculators.plan.disaggregated import check_demand

            check_demand(inputs["demand"])
    except (ValueError, OSError) as exc:
        parser.exit(2, f"servecap plan: error: {exc}\n")

    started = time.perf_counter()
    try:
        answer = run_plan(**inputs, progress=lambda text: console.print(f"[dim]{text}[/dim]"))
    except ValueError as exc:
        parser.exit(2, f"servecap plan: error: {exc}\n")
    answer["plan"]["seconds"] = round(time.perf_counter() - started, 2)
    out = Path(out_dir(args, "plan"))
    paths = write_outputs(answer, out)
    if args.json:
        print(json.dumps(answer["json"], indent=1, default=_json_default))
    else:
        for line in answer["lines"]:
            console.print(line, markup=False)
    console.print(f"written: {', '.join(str(p) for p in paths)}")
    return 0


def _topology_search(parser, args, console) -> int:
    """`--search topology`: the busiest window's topologies, written to OUT/plan.json as `topology`."""
    from servecap.plan.run import build_demand
    from servecap.plan.topology import run_topology_search, topology_lines

    started = time.perf_counter()
    try:
        check_shared_flags(args)
        for flag, given in (("--canary-weight", args.canary_weight), ("--shadow-fraction", args.shadow_fraction),
                            ("--fallback", args.fallback), ("--hedge-after", args.hedge_after),
                            ("--front-end", args.front_end)):
            if given is not None:
                raise ValueError(f"{flag} with --search topology: the search sizes one pool's busiest window")
        demand = build_demand(demand_spec_from_flags(args))
        answer = run_topology_search(args, demand, lambda text: console.print(f"[dim]{text}[/dim]"))
    except (ValueError, OSError) as exc:
        parser.exit(2, f"servecap plan: error: {exc}\n")
    answer["seconds"] = round(time.perf_counter() - started, 2)
    out = Path(out_dir(args, "plan"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(json.dumps({"topology": answer}, indent=1, default=_json_default))
    if args.json:
        print(json.dumps({"topology": answer}, indent=1, default=_json_default))
    else:
        for line in topology_lines(answer):
            console.print(line, markup=False)
    console.print(f"written: {out / 'plan.json'}")
    return 0


def _json_default(value):
    return float(value) if hasattr(value, "__float__") else str(value)


# -- flags to inputs ---------------------------------------------------------------------------------
def _inputs(args) -> dict:
    check_shared_flags(args)
    if (args.gpu is None) == (args.calibration is None):
        raise ValueError("give one replica: --gpu G --model M, or --calibration RUN_DIR")
    if args.gpu is not None and not args.model:
        raise ValueError("--gpu needs --model (a catalog model)")
    if args.replications < 1:
        raise ValueError(f"--replications must be at least 1, got {args.replications}")
    if args.router not in ROUTER_POLICIES:
        raise ValueError(f"--router {args.router!r}: unknown policy; use one of {', '.join(ROUTER_POLICIES)}")
    slo = PlanSlo(slo_from_args(args), attainment=args.attainment)
    if not slo.slo.is_set:
        raise ValueError("give at least one SLO: --slo-ttft-ms, --slo-tpot-ms or --slo-e2e-ms")
    if args.topology is not None:
        second_pool_from_flags(args, None, calibration_replica)   # refuses a second pool beside fixed PD pools
        config = disaggregated_config(args, demand_workload(args).seed)
        return {"demand_spec": demand_spec_from_flags(args), "config": config, "slo": slo, "window_s": args.window_s,
                "search": "none", "static_max": args.static_max, "replications": args.replications,
                "n_plus_one": False, "band": replica_band(args), "second": None}
    autoscaler = autoscaler_from_flags(args)
    if autoscaler is None and args.replicas is None:
        raise ValueError("give --replicas N (a fixed fleet) or --min-replicas/--max-replicas (autoscaled)")
    if args.replicas is not None and args.replicas < (0 if autoscaler else 1):
        raise ValueError(f"--replicas must be at least {0 if autoscaler else 1}, got {args.replicas}")
    faults = tuple(fault_from_flag(spec) for spec in args.kill)
    for flag, given in (("--canary-weight", args.canary_weight), ("--shadow-fraction", args.shadow_fraction),
                        ("--fallback", args.fallback)):
        if args.hedge_after and given is not None:
            raise ValueError(f"--hedge-after with {flag}: the plan hedges within one pool (a copy behind a split "
                             "or a fallback may land in either pool)")
    replica, cold_start, measured_mix = _replica(args)
    replica, mix = _lora_replica(args, replica, measured_mix)
    initial = args.replicas if args.replicas is not None else max(autoscaler.min_replicas, 1)
    config = FleetConfig(replica=replica, router=args.router, initial_replicas=initial, cold_start_s=cold_start,
                         autoscaler=autoscaler, faults=faults, retry_lost=args.retry_lost, seed=demand_workload(args).seed,
                         model_mix=mix, resilience=resilience_from_flags(args),
                         replica_errors=replica_errors_from_flags(args), hedge_after=args.hedge_after or None)
    second = second_pool_from_flags(args, config, calibration_replica)
    if second is not None and second.kind == "fallback":
        replace(config, fallback=second.rule)   # what the primary with its fallback refuses, refused here
    return {"demand_spec": demand_spec_from_flags(args), "config": config, "slo": slo, "window_s": args.window_s,
            "search": args.search, "static_max": args.static_max, "replications": args.replications,
            "n_plus_one": not args.no_n_plus_one, "band": replica_band(args), "second": second}


def _lora_replica(args, replica: ReplicaSpec, measured_mix):
    """(the replica with --max-loras slots, the mix of adapters requests ask for); a LoRA flag without a
    calibration run that served adapters is refused (nothing priced them)."""
    from contract.model_mix import parse_model_mix

    lora = replica.server.lora
    if lora is None:
        if args.model_mix is not None or args.max_loras is not None:
            raise ValueError("--model-mix and --max-loras need --calibration RUN_DIR of a run that served LoRA "
                             "adapters (`servecap sweep --server-args \"--enable-lora ...\" --model-mix ...`)")
        return replica, None
    if args.max_loras is not None:
        if args.max_loras < 1:
            raise ValueError(f"--max-loras must be at least 1, got {args.max_loras}")
        replica = replace(replica, server=replace(replica.server, lora=replace(lora, max_loras=args.max_loras)))
    return replica, parse_model_mix(args.model_mix) if args.model_mix is not None else measured_mix


def _replica(args):
    """(the replica, its front end as --front-end says, its cold start, the mix of models its calibration
    run's requests asked for, or None)."""
    replica, cold_start, mix = _engine_replica(args)
    if args.front_end == "none":
        return replace(replica, front_end=None), cold_start, mix
    if args.front_end is not None:
        replica = replace(replica, front_end=measured_front_end(args.front_end, args.strategy),
                          describe=f"{replica.describe}; front end measured by {args.front_end}")
    elif replica.front_end is not None:
        replica = replace(replica, describe=f"{replica.describe}; its front end")
    return replica, cold_start, mix


def _engine_replica(args):
    if args.gpu is not None:
        if args.cold_start_s is None:
            raise ValueError("--gpu needs --cold-start-s: a GPU replica's time to ready (model load, warm-up) "
                             "is not in the catalog")
        from calculators.plan.sizing import gpu_replica

        from calculators.moe_layout import MoeLayout

        return (gpu_replica(args.gpu, args.model, dtype=args.dtype, tp=args.tp, engine=args.engine,
                            engine_version=getattr(args, "engine_version", None), max_model_len=args.max_model_len,
                            layout=MoeLayout.from_args(args)),
                args.cold_start_s, None)
    return calibration_replica(args.calibration, args.strategy, args.cold_start_s)


def calibration_replica(run_dir: str, strategy: str | None, cold_start_s: float | None):
    """(The replica a measured run calibrates: its strategy's limits and KV cache, the fitted step model and
    LoRA costs; its cold start; the mix of models the run's requests asked for, or None)."""
    from reports.predict.calibration import calibrate, strategy_server
    from reports.predict.evidence import level_samples
    from reports.predict.prediction import _strategy
    from reports.run_data import load_run
    from reports.summary import build_levels

    data = load_run(run_dir)
    samples = level_samples(data, build_levels(data, data.run.slo))
    name = _strategy(strategy, samples)
    calibration = calibrate(samples[name], strategy_server(data.run, name))
    server = calibration.server
    if server.num_kv_blocks is None:
        raise ValueError(f"{run_dir}: run.json does not say the KV cache's block count for {name}")
    ready = (data.run.server.ready_s or {}).get(name)
    if cold_start_s is None and ready is None:
        raise ValueError(f"{run_dir} did not record its server's time to ready (a sweep before run.json kept "
                         "it, or a --url target): give --cold-start-s")
    return (ReplicaSpec(server, calibration.step_model, server.num_kv_blocks, gpus=1, hourly_usd_per_gpu=None,
                        describe=f"{name} replica calibrated on {run_dir}", front_end=calibration.front_end),
            cold_start_s if cold_start_s is not None else float(ready), calibration.model_mix)


def replica_band(args) -> float | None:
    """The catalog replica's relative speed band (as calc fleet's), carried through the plan's cost."""
    if args.gpu is None:
        return None
    from calculators.fleet import replica_from_roofline
    from engine_core.gpus import get_gpu
    from engine_core.models import resolve_model

    try:
        replica = replica_from_roofline(resolve_model(args.model), get_gpu(args.gpu), dtype=args.dtype, tp=args.tp,
                                        engine=args.engine)
    except ValueError:
        return None
    return None if replica.error_band is None else replica.error_band.relative


if __name__ == "__main__":
    raise SystemExit(main())
