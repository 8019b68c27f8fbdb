"""The plan's outputs: plan.json (everything), plan.png (demand and replicas over time; p99 per window
with the SLO line) and plan.md (the answer first, as the report puts it), and the console's lines."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from servecap.plan.run import window_arrays


def _timeline(judged, demand, window_s: float) -> dict:
    run = judged.run
    edges = np.arange(0.0, max(float(demand.span_s), window_s) + window_s, window_s)
    counts = np.histogram(demand.t_s, bins=edges)[0]
    mids = (edges[:-1] + edges[1:]) / 2
    return {"t_s": mids.tolist(), "demand_rps": (counts / window_s).tolist(),
            "ready_replicas": run.ready_over_time(mids).tolist(),
            "decisions": [d.as_json() for d in run.decisions],
            "replicas": [{"id": life.id, "requested_s": life.requested_s, "ready_s": life.ready_s,
                          "drain_s": life.drain_s, "stopped_s": life.stopped_s, "killed": life.killed,
                          "served": life.served} for life in run.lives]}


def _fmt_usd(value) -> str:
    return "n/a (no price in the catalog)" if value is None else f"${value:,.2f}"


def _lines(answer: dict) -> list[str]:
    plan = answer["plan"]
    slo = plan["slo"]
    limits = ", ".join(f"{k.removesuffix('_p99_ms').upper()} p99 <= {v:g} ms" for k, v in slo.items()
                       if k.endswith("_p99_ms"))
    attainment = plan["attainment"]
    verdict = ("no window had requests" if attainment is None else
               f"{attainment:.1%} of {slo['window_s']:g}-s windows meet {limits} "
               f"({'meets' if plan['meets_target'] else 'misses'} the {slo['attainment']:.0%} target)")
    canary = answer.get("canary")
    label = "primary" if canary else "both tiers" if answer.get("fallback") else "plan"
    lines = [f"{label}: {verdict}; {plan['gpu_hours']:,.1f} GPU-hours, "
             f"{_fmt_usd(plan['usd_per_day'])} a day, {_fmt_usd(plan['usd_per_million_tokens'])} per 1M output tokens"]
    if canary:
        lines += _canary_lines(canary, slo)
    if answer.get("shadow"):
        lines += _shadow_lines(answer["shadow"], plan, slo)
    if answer.get("fallback"):
        lines += _fallback_lines(answer["fallback"])
    pools = plan["config"].get("disaggregated")
    if pools:
        lines.append(f"disaggregated: {pools['prefill_workers']} prefill and {pools['decode_workers']} decode workers "
                     f"behind vLLM's PD router (round robin in each), KV over {pools['kv_transfer_gbs']:g} GB/s, "
                     f"hop {pools['pd_hop_ms']:g} ms")
    static = answer["static"]
    if static["replicas"] is None:
        lines.append(f"static fleet: {static['why']}")
    else:
        lines.append(f"cheapest static fleet that meets it: {static['replicas']} replica{'s' if static['replicas'] > 1 else ''}, "
                     f"{static['gpu_hours']:,.1f} GPU-hours, {_fmt_usd(static['usd_per_day'])} a day "
                     f"(attainment {static['attainment']:.1%})")
    if "n_plus_one" in answer:
        n1 = answer["n_plus_one"]
        att = "n/a" if n1["attainment"] is None else f"{n1['attainment']:.1%}"
        lines.append(f"N+1: one replica lost at t={n1['fault_at_s']:,.0f} s: attainment {att}, "
                     f"{n1['lost_requests']} requests lost with it, {n1['retried_requests']} retried, "
                     f"{n1['unfinished']} unfinished")
    router = plan.get("router") or {}
    if router.get("retries") or router.get("errored") or router.get("breaker_opened"):
        opened = ", ".join(f"{r} {n}x" for r, n in router["breaker_opened"].items()) or "none"
        failing = ", ".join(f"{r} {n} of {router['sent_to'].get(r, 0)}" for r, n in router["failed_at"].items())
        lines.append(f"router: {router['retries']:,} retries, {router['errored']:,} requests answered an error after "
                     f"the last attempt; attempts failed at {failing or 'none'}; circuits opened: {opened}")
    hedge = plan.get("hedging")
    if hedge:
        kept = "" if hedge["copies_kept_share"] is None else f", {hedge['copies_kept_share']:.0%} of the copies kept"
        lines.append(f"hedging after {hedge['after']}: {hedge['hedged']:,} of {hedge['requests']:,} requests sent twice "
                     f"(+{hedge['extra_requests']:.1%} requests){kept}; the loser cancelled at the winner's first token")
    sessions = plan.get("sessions")
    if sessions:
        took = sessions["completion_s"]
        whole = ("none completed" if took["p50"] is None else
                 f"a whole session took {took['p50']:,.1f} s at p50, {took['p90']:,.1f} s at p90")
        lines.append(f"sessions: {sessions['sessions']:,} ({sessions['completed']:,} completed); {whole}; "
                     f"{sessions['peak_open']:,} open at once at the peak, {sessions['mean_open']:,.1f} on average")
    if "breach" in answer:
        b = answer["breach"]
        lines.append(f"breach probability: {b['probability']:.0%} of {b['replications']} seeded replications "
                     "miss the target")
    if "search" in answer:
        s = answer["search"]
        lines.append("autoscaler target search: " + ("no target on the grid meets it" if s["best_target"] is None
                                                     else f"cheapest target that meets it: {s['best_target']:g}"))
    if "band" in answer:
        b = answer["band"]
        lines.append(f"speed band ±{b['relative']:.0%}: attainment {b['fast']['attainment']:.1%} (fast) to "
                     f"{b['slow']['attainment']:.1%} (slow); {_fmt_usd(b['fast']['usd_per_day'])} to "
                     f"{_fmt_usd(b['slow']['usd_per_day'])} a day")
    sent = (f"{plan['requests']:,} requests to the primary and {canary['requests']:,} to the canary" if canary
            else f"{plan['requests']:,} requests")
    lines.append(f"{sent}, {plan['replicas_started']} replicas started, "
                 f"{plan['unfinished']} unfinished; simulated in {plan.get('seconds', 0):.1f} s")
    return lines


def _attained(part: dict, slo: dict) -> str:
    if part["attainment"] is None:
        return "no window had requests"
    return (f"{part['attainment']:.1%} of windows ({'meets' if part['meets_target'] else 'misses'} the "
            f"{slo['attainment']:.0%} target)")


def _p99s(part: dict) -> str:
    """TTFT and E2E p99 in ms, those that are finite."""
    return ", ".join(f"{m.upper()} p99 {part[f'{m}_p99_s'] * 1e3:,.0f} ms" for m in ("ttft", "e2e")
                     if part.get(f"{m}_p99_s") is not None and math.isfinite(part[f"{m}_p99_s"]))


def _canary_lines(canary: dict, slo: dict) -> list[str]:
    """The canary's own line and both versions' together (the primary's is the plan's line)."""
    def over_splits(version: str) -> str:
        spread = (canary.get("attainment_over_splits") or {}).get(version)
        if not spread or spread["draws"] < 2:
            return ""
        return (f"{spread['median']:.1%} over {spread['draws']} draws of the split ({spread['min']:.1%} to "
                f"{spread['max']:.1%}); this draw: ")
    both = canary["both"]
    return [f"canary ({canary['describe']}: {canary['requests']:,} requests, {canary['share']:.1%}; "
            f"{canary['replicas']} replica{'s' if canary['replicas'] > 1 else ''} of {canary['replica']}): "
            f"{over_splits('canary')}{_attained(canary, slo)}; {_p99s(canary)}; {canary['gpu_hours']:,.1f} GPU-hours, "
            f"{_fmt_usd(canary['usd_per_day'])} a day",
            *([f"primary over the split's draws: {over_splits('primary').removesuffix('; this draw: ')}"]
              if over_splits("primary") else []),
            f"both versions: {_attained(both, slo)}; {_p99s(both)}; {both['gpu_hours']:,.1f} GPU-hours, "
            f"{_fmt_usd(both['usd_per_day'])} a day"]


def _shadow_lines(shadow: dict, plan: dict, slo: dict) -> list[str]:
    """The shadow's line: its load, latency and cost beside production's (the plan's line)."""
    extra = (f"; production and shadow {_fmt_usd(plan['usd_per_day'] + shadow['usd_per_day'])} a day"
             if plan["usd_per_day"] is not None and shadow["usd_per_day"] is not None else "")
    return [f"shadow ({shadow['fraction']:.0%} of requests mirrored: {shadow['requests']:,} copies, answers never "
            f"returned; {shadow['replicas']} replica{'s' if shadow['replicas'] > 1 else ''} of {shadow['replica']}): "
            f"{_attained(shadow, slo)}; {_p99s(shadow)}; {shadow['gpu_hours']:,.1f} GPU-hours, "
            f"{_fmt_usd(shadow['usd_per_day'])} a day{extra}"]


def _fallback_lines(fallback: dict) -> list[str]:
    """Each tier's share and tail, and the fallback pool's cost (the plan's line is both tiers')."""
    def tier(name: str) -> str:
        part = fallback["tiers"][name]
        return f"{name} answered {part['requests']:,} ({part['share']:.1%}; {_p99s(part) or 'no answer'})"
    pool = fallback["pool"] or {"gpu_hours": 0.0, "usd_per_day": 0.0}
    return [f"fallback ({fallback['replicas']} replica{'s' if fallback['replicas'] > 1 else ''} of "
            f"{fallback['replica']}; taken when {fallback['describe']}): {tier('primary')}; {tier('fallback')}: "
            f"{fallback['left_full']:,} when the primary was full, {fallback['left_errors']:,} after its error; the "
            f"fallback pool {pool['gpu_hours']:,.1f} GPU-hours, {_fmt_usd(pool['usd_per_day'])} a day"]


def _figure(path: Path, timeline: dict, windows: dict, slo: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    hours = np.asarray(timeline["t_s"]) / 3600
    top.plot(hours, timeline["demand_rps"], color="tab:blue", label="demand (requests/s)")
    top.set_ylabel("requests/s")
    twin = top.twinx()
    twin.step(hours, timeline["ready_replicas"], where="mid", color="tab:orange", label="ready replicas")
    twin.set_ylabel("replicas")
    top.legend(loc="upper left")
    twin.legend(loc="upper right")
    starts = (windows["start_s"] + (windows["start_s"][1] - windows["start_s"][0] if len(windows["start_s"]) > 1
                                    else 0) / 2) / 3600
    for metric, color in (("ttft_s", "tab:green"), ("e2e_s", "tab:purple"), ("tpot_s", "tab:red")):
        values = windows[f"{metric}_p99"] * 1e3
        values = np.where(np.isfinite(values), values, np.nan)
        limit = slo.get(f"{metric.removesuffix('_s')}_p99_ms")
        if limit is None:
            continue
        bottom.plot(starts, values, color=color, marker=".", label=f"{metric.removesuffix('_s').upper()} p99")
        bottom.axhline(limit, color=color, linestyle="--", linewidth=1, label=f"SLO {limit:g} ms")
    bottom.set_yscale("log")
    bottom.set_ylabel("ms (log)")
    bottom.set_xlabel("hours")
    bottom.legend(loc="upper left", fontsize="small")
    fig.suptitle("servecap plan: demand and replicas; p99 per window against the SLO")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _markdown(answer: dict, lines: list[str]) -> str:
    plan = answer["plan"]
    cfg = plan["config"]
    out = ["# Fleet plan", "", *[f"- {line}" for line in lines], "", "## Setup", "",
           f"- replica: {cfg['replica']} ({cfg['gpus_per_replica']} GPU each"
           + (f", ${cfg['hourly_usd_per_gpu']}/GPU-hour assumed)" if cfg["hourly_usd_per_gpu"] else ")"),
           f"- demand: {plan['demand']}, {plan['requests']:,} requests over {plan['span_s']:,.0f} s",
           f"- router: {cfg['router']} (a model of vLLM's router's policy); cold start {cfg['cold_start_s']:g} s",
           "- autoscaler: " + ("none (a fixed fleet of %d)" % cfg["initial_replicas"] if cfg["autoscaler"] is None
                               else ", ".join(f"{k} {v}" for k, v in cfg["autoscaler"].items())),
           *([f"- canary: {answer['canary']['replicas']} replica(s) of {answer['canary']['replica']}, "
              f"{answer['canary']['describe']} (a seeded draw per request under the weight in force at its send "
              "time); the primary's autoscaler, faults and searches are the primary pool's, over its share"]
             if answer.get("canary") else []),
           *([f"- shadow: {answer['shadow']['replicas']} replica(s) of {answer['shadow']['replica']}, "
              f"{answer['shadow']['fraction']:.0%} of requests mirrored (a seeded draw per request); production's "
              "pool takes every request as without it"] if answer.get("shadow") else []),
           *([f"- fallback: {answer['fallback']['replicas']} replica(s) of {answer['fallback']['replica']}, taken "
              f"when {answer['fallback']['describe']} (nginx's max_conns and backup upstream, proxy_next_upstream); "
              "the static fleet, N+1, breach, search and band are the primary's alone, without its fallback"]
             if answer.get("fallback") else []),
           "", "Simulated, not measured: each replica is the simulator's engine (the strategy's scheduler and "
           "block manager, a step-time model); no front end is modelled.", "",
           "![demand, replicas and p99 per window](plan.png)", ""]
    windows = answer["json"]["windows"]
    out += ["## Windows", "", "| start (s) | requests | ready replicas | TTFT p99 (ms) | TPOT p99 (ms) | E2E p99 (ms) | meets |",
            "|---:|---:|---:|---:|---:|---:|:---:|"]
    for w in windows:
        cells = [f"{w[k] * 1e3:,.1f}" if w[k] is not None and math.isfinite(w[k]) else "lost"
                 for k in ("ttft_p99_s", "tpot_p99_s", "e2e_p99_s")]
        met = {True: "yes", False: "no", None: "-"}[w["met"]]
        out.append(f"| {w['start_s']:,.0f} | {w['requests']} | {w['ready_replicas_mean']:.1f} | "
                   + " | ".join(cells) + f" | {met} |")
    return "\n".join(out) + "\n"


def write_outputs(answer: dict, out: Path) -> list[Path]:
    """Fill answer["json"] and answer["lines"]; write plan.json, plan.png and plan.md under `out`."""
    runs = answer.pop("_runs")
    plan, demand = runs["plan"], runs["demand"]
    window_s = answer["plan"]["slo"]["window_s"]
    timeline = _timeline(plan, demand, window_s)
    document = _finite({**answer, "windows": plan.outcome.to_dict()["windows"], "timeline": timeline})
    answer["json"] = document
    lines = _lines(answer)
    answer["lines"] = lines
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "plan.json", out / "plan.png", out / "plan.md"]
    paths[0].write_text(json.dumps(document, indent=1))
    _figure(paths[1], timeline, window_arrays(plan), answer["plan"]["slo"])
    paths[2].write_text(_markdown(answer, lines))
    return paths


def _finite(value):
    """JSON without NaN/Infinity: a window's lost requests make its p99 infinite; JSON says null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, np.generic):
        return _finite(value.item())
    return value
