"""The plan's runs, in order, and the answer they make: the plan as asked, N+1, the cheapest static
fleet, the breach probability, the autoscaler-target search and the speed band's ends."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from calculators.plan.canary import CanaryPlan, canary_mask, plan_canary
from calculators.plan.fallback import TIERS, FallbackPlan, plan_fallback
from calculators.plan.shadow import ShadowPlan, plan_shadow
from calculators.plan.demand import Demand, from_rows
from calculators.plan.demand_curves import diurnal_with_bursts, rate_curve_arrivals
from calculators.plan.demand_sessions import agent_session_demand
from calculators.plan.fleet import FleetConfig
from calculators.plan.outcome import PlanSlo
from calculators.plan.session_outcome import session_summary
from calculators.plan.planner import Judged, breach_probability, cheapest_static, judge, search_targets
from calculators.plan.planner import n_plus_one as lose_one_at_peak
from calculators.sim.step_model import StepTimeModel
from servecap.plan.front_end import describe_front_end

if TYPE_CHECKING:
    from servecap.plan.second_pool import SecondPool

TARGET_GRID = (0.5, 0.75, 1.0, 1.5, 2.0)   # --search target: these multiples of --target


EMPTY_DEMAND = "the demand has no requests (a trace cut to nothing, or a rate curve of zero)"


def build_demand(spec: dict, replication: int = 0) -> Demand:
    """The demand `spec` describes; a synthetic one is redrawn per replication, a trace is itself. One
    with no requests is refused (ValueError): there is nothing to plan or to send."""
    demand = _demand(spec, replication)
    if not len(demand):
        raise ValueError(EMPTY_DEMAND)
    return demand


def _demand(spec: dict, replication: int) -> Demand:
    seed = spec["seed"] + replication
    if spec["kind"] == "trace":
        trace = spec["trace"]
        rows = trace.rows
        hash_ids = [row.hash_ids for row in rows] if any(row.hash_ids for row in rows) else None
        sessions = [row.key for row in rows] if any(row.key for row in rows) else None   # what the router keys on
        skipped = f" ({trace.skipped} failed rows skipped)" if getattr(trace, "skipped", 0) else ""
        parents, joins = (trace.links() if any(row.parallel is not None for row in rows)
                          else (None, ()))   # sub-agents sent at once and joined (the trace's `parallel`)
        return from_rows([row.offset_s for row in rows], [row.input_tokens for row in rows],
                         [row.output_tokens for row in rows], hash_ids, speedup=spec["speedup"],
                         duration_s=spec["duration_s"], session=sessions,
                         delay_s=[row.delay_s for row in rows] if trace.chained else None,
                         parents=parents, joins=joins, source=f"{trace.format} trace {trace.path}{skipped}")
    lengths = dict(prompt=spec["prompt"], output=spec["output"], seed=seed, speedup=spec["speedup"],
                   sessions=spec["sessions"], turns_prefix_tokens=spec["prefix_tokens"])
    if spec["kind"] == "rate_curve":
        times, rates = spec["curve"]
        return _agents(rate_curve_arrivals(times, rates, duration_s=spec["duration_s"], **lengths,
                                           source=f"rate curve {spec['source']}"), spec, seed)
    # --duration is planned (sped-up) time, as for a trace; the day's curve spans that much of real time
    day = spec["duration_s"] * spec["speedup"] if spec["duration_s"] else spec["period_s"]
    times, rates = diurnal_with_bursts(peak_rps=spec["peak_rps"], trough_rps=spec["trough_rps"],
                                       period_s=spec["period_s"], duration_s=day,
                                       bursts_per_day=spec["bursts_per_day"],
                                       burst_multiplier=spec["burst_multiplier"],
                                       burst_duration_s=spec["burst_duration_s"], seed=seed)
    return _agents(rate_curve_arrivals(times, rates, duration_s=day / spec["speedup"], **lengths,
                                       source=f"a synthetic day: {spec['peak_rps']:g} req/s peak, "
                                              f"{spec['trough_rps']:g} trough, {spec['bursts_per_day']:g} bursts "
                                              f"of x{spec['burst_multiplier']:g}"), spec, seed)


def _agents(arrivals: Demand, spec: dict, seed: int) -> Demand:
    """With --session, each arrival starts an agent session (calculators.plan.demand_sessions)."""
    if spec.get("session") is None:
        return arrivals
    return agent_session_demand(arrivals, spec["session"], prompt=spec["prompt"], output=spec["output"], seed=seed,
                                think_time_s=spec["think_time_s"] / spec["speedup"])


def scaled(model: StepTimeModel, factor: float) -> StepTimeModel:
    """Every step `factor` times as long (a replica at an end of its speed band)."""
    return replace(model, base_s=model.base_s * factor, per_seq_s=model.per_seq_s * factor,
                   per_prefill_token_s=model.per_prefill_token_s * factor,
                   per_context_token_s=model.per_context_token_s * factor,
                   batch_table=tuple(v * factor for v in model.batch_table))


def _summary(judged: Judged) -> dict:
    o, run = judged.outcome, judged.run
    return {"attainment": o.attainment, "meets_target": o.meets_target, "requests": o.requests,
            "unfinished": o.unfinished, "gpu_hours": o.gpu_hours, "usd": o.usd, "usd_per_day": o.usd_per_day,
            "usd_per_million_tokens": o.usd_per_million_tokens, "replicas_started": len(run.lives),
            "replicas_killed": sum(life.killed for life in run.lives),
            "retried_requests": int(run.retried.sum()),
            "lost_requests": 0 if run.lost is None else int(run.lost.sum()),
            "errored_requests": 0 if run.errored is None else int(run.errored.sum()), "router": run.router,
            "prefix_hit_rate": run.prefix_hit_rate(), "hedging": run.hedging,
            **{f"{m.removesuffix('_s')}_{q}_s": getattr(o, q)[m] for q in ("p50", "p99") for m in o.p50}}


def run_plan(*, demand: Demand, demand_spec: dict, config: FleetConfig, slo: PlanSlo, window_s: float,
             search: str, static_max: int, replications: int, n_plus_one: bool, band: float | None,
             progress: Callable[[str], None], second: SecondPool | None = None) -> dict:
    """`demand` is `build_demand(demand_spec)`, built by the caller (where its errors are the user's).
    With a canary (`second`) the plan is the primary pool on its share of the demand, and every later
    question (N+1, static, breach, search, band) is the primary's; with a shadow, production's pool
    takes every request as it would alone, and the shadow is its own section; with a fallback, the plan
    is both tiers (every request, both pools' cost) and every later question is the primary's alone,
    without its fallback (what it would take to need none)."""
    extra: dict = {}
    second_answer = None
    if second is not None and second.kind == "canary":
        progress(f"{len(demand):,} requests over {demand.span_s:,.0f} s; simulating the primary and the canary")
        split = plan_canary(demand, config, second.config, second.schedule, slo, window_s=window_s, seed=config.seed,
                            splits=second.splits, on_progress=progress)
        second_answer = _describe_canary(split, second.config)
        demand, plan = demand.select(np.flatnonzero(~split.mask)), split.primary
        extra["canary"] = split.canary
    elif second is not None and second.kind == "fallback":
        progress(f"{len(demand):,} requests over {demand.span_s:,.0f} s; simulating the primary, then its fallback")
        tiers = plan_fallback(demand, replace(config, fallback=second.rule), second.config, slo, window_s=window_s)
        second_answer = _describe_fallback(tiers, second.config, slo, window_s)
        plan = Judged(tiers.primary.config, tiers.merged, tiers.both)
        extra["fallback"] = tiers
    elif second is not None:
        progress(f"{len(demand):,} requests over {demand.span_s:,.0f} s; simulating production and its shadow")
        mirrored = plan_shadow(demand, config, second.config, fraction=second.fraction, slo=slo, window_s=window_s,
                               seed=config.seed)
        second_answer, plan = _describe_shadow(mirrored, second.config), mirrored.production
        extra["shadow"] = mirrored.shadow
    else:
        progress(f"{len(demand):,} requests over {demand.span_s:,.0f} s; simulating the plan")
        plan = judge(demand, config, slo, window_s=window_s,
                     on_progress=lambda done, total: progress(f"  plan: {done:,} of {total:,} requests routed"))
    answer: dict = {"plan": {"config": _describe_config(config), "demand": demand.source, "requests": len(demand),
                             "span_s": float(demand.span_s), "slo": _describe_slo(slo, window_s),
                             **_summary(plan)}}
    sessions = session_summary(demand, plan.run)
    if sessions is not None:
        answer["plan"]["sessions"] = sessions
    if second_answer is not None:
        answer[second.kind] = second_answer
    if n_plus_one:
        progress("N+1: the busiest replica lost at the peak")
        lost = extra["n_plus_one"] = lose_one_at_peak(demand, config, slo, window_s=window_s)
        answer["n_plus_one"] = {"fault_at_s": lost.config.faults[-1].t_s, **_summary(lost)}
    if config.disaggregated is not None:   # fixed pools: sizing them is `--search topology`'s question
        static = None
        answer["static"] = {"replicas": None, "why": f"{config.disaggregated} is fixed pools (no static search: "
                                                     "--search topology sizes them)"}
    else:
        progress("the cheapest static fleet that meets the target")
        static = cheapest_static(demand, config, slo, window_s=window_s, max_replicas=static_max, progress=progress)
        answer["static"] = ({"replicas": None, "why": f"no fixed fleet of up to {static_max} replicas meets "
                                                      f"{slo.attainment:.0%} of windows"} if static is None else
                            {"replicas": static.config.initial_replicas, **_summary(static)})
    if replications > 1:
        progress(f"{replications} seeded replications")
        probability, attainments = breach_probability(lambda r: _primary_share(build_demand(demand_spec, r), second,
                                                                               config.seed), config, slo,
                                                      replications=replications, window_s=window_s)
        answer["breach"] = {"replications": replications, "probability": probability, "attainments": attainments}
    if search == "target":
        grid = [config.autoscaler.target * f for f in TARGET_GRID] if config.autoscaler else []
        best, rows = search_targets(demand, config, slo, grid, window_s=window_s, progress=progress)
        answer["search"] = {"targets": [{"target": t, "attainment": a, "gpu_hours": g, "usd": u} for t, a, g, u in rows],
                            "best_target": None if best is None else best.config.autoscaler.target}
    if band:
        progress(f"the replica's speed band (±{band:.0%})")
        ends = {}
        for name, factor in (("fast", 1 / (1 + band)), ("slow", 1 + band)):
            spec = replace(config.replica, step_model=scaled(config.replica.step_model, factor))
            ends[name] = _summary(judge(demand, replace(config, replica=spec), slo, window_s=window_s))
        answer["band"] = {"relative": band, **ends}
    answer["_runs"] = {"plan": plan, "demand": demand, "static": static, **extra}
    return answer


def _primary_share(demand: Demand, second: SecondPool | None, seed: int) -> Demand:
    """The requests the primary pool gets: all of them (a shadow's are copies), or those a canary leaves it."""
    if second is None or second.kind != "canary":
        return demand
    return demand.select(np.flatnonzero(~canary_mask(demand, second.schedule, seed)))


def _describe_shadow(mirrored: ShadowPlan, config: FleetConfig) -> dict:
    """The shadow pool on its copies: its load, latency and cost (its answers reach no client)."""
    return {"fraction": mirrored.fraction, "replica": config.replica.describe, "replicas": config.initial_replicas,
            "requests": int(mirrored.mask.sum()), **_summary(mirrored.shadow),
            "windows": mirrored.shadow.outcome.to_dict()["windows"]}


def _describe_fallback(tiers: FallbackPlan, config: FleetConfig, slo: PlanSlo, window_s: float) -> dict:
    """Each tier on the requests it answered (share, attainment, latency) and the fallback pool's cost."""
    pool = tiers.fallback
    by_tier = {}
    for name in TIERS:
        part = tiers.tier_outcome(name, slo, window_s)
        by_tier[name] = {"requests": part.requests, "share": part.requests / max(1, tiers.both.requests),
                         "attainment": part.attainment, "unfinished": part.unfinished, "failed": part.failed,
                         **{f"{m.removesuffix('_s')}_{q}_s": getattr(part, q)[m] for q in ("p50", "p99")
                            for m in part.p50}}
    left = int(tiers.tier.sum())
    return {"rule": tiers.rule.spec(), "describe": tiers.rule.describe(), "replica": config.replica.describe,
            "front_end": describe_front_end(config.replica.front_end), "replicas": config.initial_replicas,
            "left_full": left - tiers.by_errors, "left_errors": tiers.by_errors, "tiers": by_tier,
            "pool": None if pool is None else {k: v for k, v in _summary(pool).items()
                                               if k in ("gpu_hours", "usd", "usd_per_day", "replicas_started")},
            "primary_pool": {k: v for k, v in _summary(tiers.primary).items()
                             if k in ("gpu_hours", "usd", "usd_per_day", "replicas_started")}}


def _describe_canary(split: CanaryPlan, config: FleetConfig) -> dict:
    both = split.both
    return {"schedule": [{"t_s": t, "weight": w} for t, w in split.schedule.steps],
            "describe": split.schedule.describe(), "replica": config.replica.describe,
            "front_end": describe_front_end(config.replica.front_end),
            "replicas": config.initial_replicas, "requests": int(split.mask.sum()),
            "share": float(split.mask.mean()), **_summary(split.canary),
            "windows": split.canary.outcome.to_dict()["windows"],
            "attainment_over_splits": {"primary": split.attainment_over_draws("primary"),
                                       "canary": split.attainment_over_draws("canary")},
            "both": {"attainment": both.attainment, "meets_target": both.meets_target, "requests": both.requests,
                     "unfinished": both.unfinished, "failed": both.failed, "gpu_hours": split.gpu_hours,
                     "usd": split.usd, "usd_per_day": split.usd_per_day,
                     **{f"{m.removesuffix('_s')}_{q}_s": getattr(both, q)[m] for q in ("p50", "p99") for m in both.p50}}}


def _describe_config(config: FleetConfig) -> dict:
    a = config.autoscaler
    topology = config.disaggregated
    return {"replica": config.replica.describe,
            "disaggregated": None if topology is None else {
                "topology": str(topology), "prefill_workers": topology.prefill, "decode_workers": topology.decode,
                "kv_bytes_per_token": config.kv.bytes_per_token, "kv_transfer_gbs": config.kv.link_bytes_per_s / 1e9,
                "kv_transfer_latency_s": config.kv.latency_s, "pd_hop_ms": config.pd_hop_s * 1e3}, "gpus_per_replica": config.replica.gpus,
            "hourly_usd_per_gpu": config.replica.hourly_usd_per_gpu, "router": config.router,
            "initial_replicas": config.initial_replicas, "cold_start_s": config.cold_start_s,
            "autoscaler": None if a is None else {
                "min_replicas": a.min_replicas, "max_replicas": a.max_replicas, "metric": a.metric,
                "target": a.target, "interval_s": a.interval_s, "up_window_s": a.up_window_s,
                "down_window_s": a.down_window_s},
            "faults": [{"t_s": f.t_s, "replica": f.replica} for f in config.faults], "seed": config.seed,
            "hedge_after": config.hedge_after, "front_end": describe_front_end(config.replica.front_end),
            "lora": _describe_lora(config)}


def _describe_lora(config: FleetConfig) -> dict | None:
    lora, mix = config.replica.server.lora, config.model_mix
    if lora is None:
        return None
    return {"max_loras": lora.max_loras, "per_adapter_ms": lora.per_adapter_s * 1e3,
            "per_lora_token_us": lora.per_lora_token_s * 1e6, "load_ms": lora.load_s * 1e3,
            "models_in_mix": None if mix is None else len(mix.names)}


def _describe_slo(slo: PlanSlo, window_s: float) -> dict:
    return {**{f"{name.removesuffix('_ms')}_p99_ms": limit for name, limit in slo.slo.to_dict().items()},
            "attainment": slo.attainment, "window_s": window_s}


def window_arrays(judged: Judged) -> dict[str, np.ndarray]:
    """Per window: start, requests, p99 of each metric, met (1/0/nan)."""
    w = judged.outcome.windows
    return {"start_s": np.array([x.start_s for x in w]), "requests": np.array([x.requests for x in w]),
            **{f"{m}_p99": np.array([x.p99[m] for x in w]) for m in ("ttft_s", "tpot_s", "e2e_s")},
            "met": np.array([np.nan if x.met is None else float(x.met) for x in w])}
