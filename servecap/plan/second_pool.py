"""A second version's pool beside the plan's: a canary (`--canary-weight`: a weighted share of the
requests, calculators.plan.canary), a shadow (`--shadow-fraction`: a mirrored fraction whose answers
no client sees, calculators.plan.shadow) or a fallback tier (`--fallback`: the requests the primary is
too full for or answered an error, calculators.plan.fallback); its replicas, and what its replica
changes. `servecap plan` and `servecap fleet` take the same flags.

The second pool's replica is the primary's unless a flag says what changed: another catalog GPU, model,
dtype or TP degree (`--canary-gpu`, `--canary-model`, `--canary-dtype`, `--canary-tp`; the shadow's
`--shadow-*` alike; each defaulting to the primary's), or, in the plan, a run that measured the new
version (`--canary-calibration RUN_DIR`, `--shadow-calibration`). A canary with none of them is an A/A
test: the same replica on both sides, the spread a real canary's figures must beat.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

from calculators.plan.canary import CanarySchedule
from calculators.plan.fallback_rule import FallbackRule
from calculators.plan.fleet import FleetConfig
from calculators.plan.shadow import check_fraction
from contract.options import add_options, option, parse_float, parse_int
from engine_core.gpus import GpuOptions
from engine_core.options import EngineOptions
from reports.predict.options import CalibrationOptions

KINDS = ("canary", "shadow", "fallback")
MAIN_FLAGS = {"canary": "canary_weight", "shadow": "shadow_fraction", "fallback": "fallback"}   # the pool's own
REPLICA_FLAGS = ("gpu", "model", "dtype", "tp", "calibration")


@dataclass(frozen=True)
class CanaryOptions:
    canary_weight: str | None = option(None, metavar="W|T:W,...",
                                       help="send this share of requests to a canary pool: one weight, or a schedule "
                                            "of T:W steps (seconds from the demand's start, the first at 0), e.g. "
                                            "0:0.05,3600:0.1,7200:0.25")
    canary_replicas: int = option(1, parse=parse_int, help="the canary pool's replicas (a fixed pool)")
    canary_splits: int = option(8, parse=parse_int,
                                help="plan: draws of the split (a proxy draws it afresh each run): each version's "
                                     "attainment is their median, with their range; 1: one draw")


@dataclass(frozen=True)
class ShadowOptions:
    shadow_fraction: float | None = option(None, parse=parse_float, metavar="F",
                                           help="mirror this share of requests (0 < F <= 1) to a shadow pool whose "
                                                "answers are recorded, never returned")
    shadow_replicas: int = option(1, parse=parse_int, help="the shadow pool's replicas (a fixed pool)")


@dataclass(frozen=True)
class FallbackOptions:
    fallback: str | None = option(None, metavar="depth:N|errors|depth:N,errors",
                                  help="send a request to a fallback pool (nginx's backup upstream) when the primary "
                                       "holds N open requests (max_conns), and/or when its router answers "
                                       "429/500/502/503/504 (proxy_next_upstream); each answer counted by its tier")
    fallback_replicas: int = option(1, parse=parse_int, help="the fallback pool's replicas (a fixed pool)")


@dataclass(frozen=True)
class SecondPool:
    """The second pool's config and how it takes requests: a canary's weights, or a shadow's fraction."""

    kind: str                                # "canary" or "shadow"
    config: FleetConfig
    schedule: CanarySchedule | None = None   # the canary's
    splits: int = 1                          # the canary's: draws of its split
    fraction: float | None = None            # the shadow's
    rule: FallbackRule | None = None         # the fallback's: when a request leaves the primary for it


def add_second_pool_flags(p: argparse.ArgumentParser) -> None:
    for kind, options, what in (("canary", CanaryOptions, "a weighted share of the requests"),
                                ("shadow", ShadowOptions, "a mirrored fraction of the requests, answers never returned"),
                                ("fallback", FallbackOptions, "the requests the primary is full for or failed")):
        add_options(p, options, title=f"{kind} (a second version's pool: {what}; its replica the primary's but what "
                                      "these flags change)", typed=True)
        add_options(p, GpuOptions, only=("gpu",), prefix=kind, typed=True)
        add_options(p, EngineOptions, only=("model", "dtype", "tp"), prefix=kind, typed=True)
        add_options(p, CalibrationOptions, only=("calibration",), prefix=kind, typed=True)


def changed_flags(args, kind: str) -> list[str]:
    """The flags that say how the `kind` pool's replica differs from the primary's."""
    return [f"--{kind}-{name}" for name in REPLICA_FLAGS if getattr(args, f"{kind}_{name}") is not None]


def _main_flag(kind: str) -> str:
    return "--" + MAIN_FLAGS[kind].replace("_", "-")


def kind_from_flags(args) -> str | None:
    """Which second pool the flags ask for (None: none), its own flags checked: what `servecap plan` and
    `servecap fleet` check alike. ValueError names a bad flag."""
    given = []
    for kind in KINDS:
        main = getattr(args, MAIN_FLAGS[kind])
        replicas = getattr(args, f"{kind}_replicas")
        if main is None:
            changed = changed_flags(args, kind)
            if changed or replicas != 1:
                raise ValueError(f"{', '.join(changed) or f'--{kind}-replicas'}: a {kind} needs {_main_flag(kind)}")
            continue
        if replicas < 1:
            raise ValueError(f"--{kind}-replicas must be at least 1, got {replicas}")
        given.append(kind)
    if len(given) > 1:
        raise ValueError(f"{' and '.join(map(_main_flag, given))}: one second pool at a time")
    if given and ((args.dp or 1) > 1 or args.expert_parallel):
        raise ValueError(f"{_main_flag(given[0])} with --dp/--expert-parallel: a second pool beside an MoE layout is "
                         "not modelled")
    if given and args.topology is not None:
        raise ValueError(f"{_main_flag(given[0])} with --topology: a second pool beside fixed PD pools is not modelled")
    return given[0] if given else None


def schedule_from_flags(args) -> CanarySchedule:
    return CanarySchedule.parse(args.canary_weight)


def second_pool_from_flags(args, primary: FleetConfig, calibration_replica) -> SecondPool | None:
    """The second pool (its config, its weights or fraction), or None. `calibration_replica` is the plan's
    (run dir, strategy, cold start) -> (replica, cold start, mix). ValueError names a bad flag."""
    kind = kind_from_flags(args)
    if kind is None:
        return None
    schedule = schedule_from_flags(args) if kind == "canary" else None
    if kind == "canary" and args.canary_splits < 1:
        raise ValueError(f"--canary-splits must be at least 1, got {args.canary_splits}")
    fraction = check_fraction(args.shadow_fraction) if kind == "shadow" else None
    rule = FallbackRule.parse(args.fallback) if kind == "fallback" else None
    changed = changed_flags(args, kind)
    replica = primary.replica
    calibration = getattr(args, f"{kind}_calibration")
    if calibration is not None:
        if len(changed) > 1:
            raise ValueError(f"--{kind}-calibration is the {kind}'s whole replica: leave out --{kind}-gpu, "
                             f"--{kind}-model, --{kind}-dtype and --{kind}-tp")
        replica = calibration_replica(calibration, None, primary.cold_start_s)[0]
    elif changed:
        own = {name: getattr(args, f"{kind}_{name}") for name in REPLICA_FLAGS}
        gpu, model = own["gpu"] or args.gpu, own["model"] or args.model
        if gpu is None or model is None:
            raise ValueError(f"{', '.join(changed)}: a catalog {kind} needs a GPU and a model (--{kind}-gpu and "
                             f"--{kind}-model, or the primary's --gpu and --model)")
        from calculators.plan.sizing import gpu_replica

        replica = gpu_replica(gpu, model, dtype=own["dtype"] or args.dtype, tp=own["tp"] or args.tp,
                              engine=args.engine, engine_version=getattr(args, "engine_version", None),
                              max_model_len=args.max_model_len)
    same = replica is primary.replica
    if kind == "shadow":   # no client reads its answers: its engines' clock, as the fleet reads a shadow
        replica = replace(replica, front_end=None)
    elif calibration is None and replica.front_end is None:   # a catalog what-if on the primary's host
        replica = replace(replica, front_end=primary.replica.front_end)
    config = replace(primary, replica=replica, initial_replicas=getattr(args, f"{kind}_replicas"), autoscaler=None,
                     faults=(), replica_errors=None, model_mix=primary.model_mix if same else None)
    return SecondPool(kind, config, schedule, args.canary_splits if kind == "canary" else 1, fraction, rule)
