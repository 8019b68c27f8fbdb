"""`servecap plan --canary-weight`: a second version's pool beside the plan's, its share of requests and
its replicas (what a canary is: calculators.plan.canary), and what each version answered.

The canary's replica is the primary's unless a flag says what changed: another catalog GPU, model,
dtype or TP degree (`--canary-gpu`, `--canary-model`, `--canary-dtype`, `--canary-tp`, each defaulting
to the primary's), or a run that measured the new version (`--canary-calibration RUN_DIR`). With none
of them the split is an A/A test: the same replica on both sides, the spread a real canary's figures
must beat before they say anything.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

from calculators.plan.canary import CanarySchedule
from calculators.plan.fleet import FleetConfig
from contract.options import add_options, option, parse_int
from engine_core.gpus import GpuOptions
from engine_core.options import EngineOptions
from reports.predict.options import CalibrationOptions

PREFIX = "canary"


@dataclass(frozen=True)
class CanaryOptions:
    canary_weight: str | None = option(None, metavar="W|T:W,...",
                                       help="send this share of requests to a canary pool: one weight, or a schedule "
                                            "of T:W steps (seconds from the demand's start, the first at 0), e.g. "
                                            "0:0.05,3600:0.1,7200:0.25")
    canary_replicas: int = option(1, parse=parse_int, help="the canary pool's replicas (a fixed pool)")


def add_canary_flags(p: argparse.ArgumentParser) -> None:
    title = "canary (a second version's pool, a weighted share of the requests; its replica the primary's but what"
    add_options(p, CanaryOptions, title=f"{title} these flags change)", typed=True)
    add_options(p, GpuOptions, only=("gpu",), prefix=PREFIX, typed=True)
    add_options(p, EngineOptions, only=("model", "dtype", "tp"), prefix=PREFIX, typed=True)
    add_options(p, CalibrationOptions, only=("calibration",), prefix=PREFIX, typed=True)


def changed_flags(args) -> list[str]:
    """The flags that say how the canary's replica differs from the primary's."""
    return [f"--canary-{name}" for name in ("gpu", "model", "dtype", "tp", "calibration")
            if getattr(args, f"canary_{name}") is not None]


def schedule_from_flags(args) -> CanarySchedule | None:
    """The canary's weights, or None without --canary-weight (then no other canary flag may be given):
    what `servecap plan` and `servecap fleet` check alike. ValueError names a bad flag."""
    changed = changed_flags(args)
    if args.canary_weight is None:
        if changed or args.canary_replicas != 1:
            raise ValueError(f"{', '.join(changed) or '--canary-replicas'}: a canary needs --canary-weight")
        return None
    if args.canary_replicas < 1:
        raise ValueError(f"--canary-replicas must be at least 1, got {args.canary_replicas}")
    return CanarySchedule.parse(args.canary_weight)


def canary_from_flags(args, primary: FleetConfig, calibration_replica) -> tuple[FleetConfig, CanarySchedule] | None:
    """(the canary pool's config, its weight schedule), or None without --canary-weight. `calibration_replica`
    is the plan's (run dir, strategy, cold start) -> (replica, cold start, mix). ValueError names a bad flag."""
    schedule = schedule_from_flags(args)
    if schedule is None:
        return None
    changed = changed_flags(args)
    if getattr(args, "topology", None) is not None:
        raise ValueError("--canary-weight with --topology: a canary splits an aggregated pool (a disaggregated "
                         "canary is not modelled)")
    replica = primary.replica
    if args.canary_calibration is not None:
        if len(changed) > 1:
            raise ValueError("--canary-calibration is the canary's whole replica: leave out --canary-gpu, "
                             "--canary-model, --canary-dtype and --canary-tp")
        replica = calibration_replica(args.canary_calibration, None, primary.cold_start_s)[0]
    elif changed:
        gpu, model = args.canary_gpu or args.gpu, args.canary_model or args.model
        if gpu is None or model is None:
            raise ValueError(f"{', '.join(changed)}: a catalog canary needs a GPU and a model (--canary-gpu and "
                             "--canary-model, or the primary's --gpu and --model)")
        from calculators.plan.sizing import gpu_replica

        replica = gpu_replica(gpu, model, dtype=args.canary_dtype or args.dtype, tp=args.canary_tp or args.tp,
                              engine=args.engine, engine_version=getattr(args, "engine_version", None),
                              max_model_len=args.max_model_len)
    config = replace(primary, replica=replica, initial_replicas=args.canary_replicas, autoscaler=None, faults=(),
                     replica_errors=None, model_mix=primary.model_mix if replica is primary.replica else None)
    return config, schedule
