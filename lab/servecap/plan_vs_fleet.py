"""The plan against the fleet, on the same demand: `servecap fleet` run for real, then `servecap plan` with
the same flags, compared on the issue's four checks.

    python -m lab.servecap.plan_vs_fleet --out lab/results/plan_vs_fleet/RUN --gpu l4 --model llama-3.1-8b \\
        --max-model-len 4096 [--routers round_robin,cache_aware] [--compare-only] -- SHARED FLAGS

SHARED FLAGS are the demand, scaling, fault and SLO flags both commands take (e.g. --diurnal 8:1.5
--period 600 --horizon 660 ... --min-replicas 1 --max-replicas 4 --target 8 --kill 300
--slo-ttft-ms 2000 --window-s 60 --cold-start-s 20 --seed 4). Per router it writes OUT/fleet-ROUTER
(a fleet run: emulated replicas `--emulate GPU --model M --server-args "--max-model-len N"`) and
OUT/plan-ROUTER (`--gpu GPU --model M --max-model-len N`), then prints and writes OUT/compare.json:
- replicas over time: at each autoscaler decision, the plan's count against the fleet's, ready
  replicas and the count wanted: the share of decision intervals where they are the same;
- per window with at least 100 requests (in the fleet), p99 TTFT and E2E: the median |plan / fleet - 1|;
- SLO attainment: plan minus fleet, in points;
- each other router against round_robin (cache_aware, consistent_hash, ...): the prefix-cache hit rate, and
  the TTFT p50 gain (1 - p50 router / p50 round_robin) over every request, predicted against measured
  (relative error);
- with `--canary-weight` among the shared flags: per version, its share of the requests, its SLO attainment
  (plan minus fleet, in points; the plan's is the median over its split's draws, `--canary-splits`), its p50/p99 TTFT and E2E, and the canary's p99 TTFT per window;
- with `--hedge-after` among the shared flags: the extra requests (copies over requests, target within 10%),
  the share of copies kept, and TTFT p50/p99 over every request (target: p99 within 15%);
- with `--shadow-fraction` among the shared flags: the shadow's copies (target within 5%) and p99 TTFT on its
  engines' clock (target within 15%), and production's p99 TTFT;
- with `--fallback` among the shared flags: each tier's share of the requests (plan minus fleet, in points;
  target within 5), the requests that left when the primary was full and after its error, and each tier's
  p99 TTFT;
- with `--replica-fault` among the shared flags: per faulted replica, the attempts it answered with its
  fault (the plan's `router.failed_at` against the replica's injected-fault counter, fleet.json
  `injected_errors`), and the requests that ended in an error.
`--compare-only` recomputes the comparison from the directories already there; `--plans-only` runs the
plans again (same flags) beside the fleets already there; `--plan-args` gives the plan flags of its own (a
measured `--front-end RUN`).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

MIN_WINDOW_REQUESTS = 100


def _run(command: list[str], log: Path) -> None:
    print("$ " + " ".join(command), flush=True)
    with log.open("w") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT).returncode
    if code != 0:
        raise SystemExit(f"exit {code}: see {log}")


def run_pair(out: Path, router: str, args, shared: list[str], fleet_too: bool = True) -> None:
    fleet, plan = out / f"fleet-{router}", out / f"plan-{router}"
    if fleet_too:
        _run([sys.executable, "-m", "servecap", "fleet", "--emulate", args.gpu, "--model", args.model,
              "--server-args", f"--max-model-len {args.max_model_len} {args.server_args}".strip(), *shared,
              "--router", router, "--out", str(fleet), "--no-report"], out / f"fleet-{router}.log")
    if plan.exists():
        shutil.rmtree(plan)
    _run([sys.executable, "-m", "servecap", "plan", "--gpu", args.gpu, "--model", args.model,
          "--max-model-len", str(args.max_model_len), *shared, "--router", router, "--no-n-plus-one",
          "--static-max", "8", *args.plan_args.split(), "--out", str(plan)], out / f"plan-{router}.log")


def _p99(value) -> float:
    """A window's p99 as written: null or Infinity when a request never finished (unbounded)."""
    return math.inf if value is None else float(value)


def _rel(predicted, measured) -> float:
    if predicted is None or measured is None:
        return math.nan
    if math.isinf(predicted) or math.isinf(measured) or measured == 0:
        return 0.0 if predicted == measured else math.inf
    return predicted / measured - 1


def compare_pair(out: Path, router: str) -> dict:
    fleet = json.loads((out / f"fleet-{router}" / "fleet.json").read_text())
    plan = json.loads((out / f"plan-{router}" / "plan.json").read_text())
    interval = (fleet.get("autoscaler") or {}).get("interval_s") or 1.0   # fixed pools: no decisions
    decisions = {}
    for source, rows in (("plan", plan["timeline"]["decisions"]), ("fleet", fleet["decisions"])):
        for row in rows:
            decisions.setdefault(round(row["t_s"] / interval), {})[source] = row
    both = [d for d in decisions.values() if len(d) == 2]
    same_ready = sum(d["plan"]["ready"] == d["fleet"]["ready"] for d in both)
    same_wanted = sum(d["plan"]["wanted"] == d["fleet"]["wanted"] for d in both)
    windows = []
    # with a canary the plan's windows are the primary's share: the fleet's primary version is their match
    whole = fleet["canary"]["primary"] if fleet.get("canary") else fleet["outcome"]
    measured = {w["start_s"]: w for w in whole["windows"]}
    for w in plan["windows"]:
        m = measured.get(w["start_s"])
        if m is None or m["requests"] < MIN_WINDOW_REQUESTS:
            continue
        windows.append({"start_s": w["start_s"], "requests_plan": w["requests"], "requests_fleet": m["requests"],
                        **{f"{k}_p99_{side}": _p99(src[f"{k}_p99_s"]) for k in ("ttft", "tpot", "e2e")
                           for side, src in (("plan", w), ("fleet", m))},
                        "ttft_err": _rel(_p99(w["ttft_p99_s"]), _p99(m["ttft_p99_s"])),
                        "tpot_err": _rel(_p99(w["tpot_p99_s"]), _p99(m["tpot_p99_s"])),
                        "e2e_err": _rel(_p99(w["e2e_p99_s"]), _p99(m["e2e_p99_s"])),
                        "met_plan": w["met"], "met_fleet": m["met"]})
    p, f = plan["plan"], whole
    return {
        "router": router, "decision_intervals": len(both),
        "same_ready_share": same_ready / len(both) if both else None,
        "same_wanted_share": same_wanted / len(both) if both else None,
        "windows_judged": len(windows),
        "ttft_p99_median_abs_err": float(np.median([abs(w["ttft_err"]) for w in windows])) if windows else None,
        "e2e_p99_median_abs_err": float(np.median([abs(w["e2e_err"]) for w in windows])) if windows else None,
        "tpot_p99_median_abs_err": float(np.median([abs(w["tpot_err"]) for w in windows])) if windows else None,
        "attainment_plan": p["attainment"], "attainment_fleet": f["attainment"],
        "attainment_points": None if p["attainment"] is None or f["attainment"] is None
        else 100 * (p["attainment"] - f["attainment"]),
        "prefix_hit_rate_plan": p.get("prefix_hit_rate"), "prefix_hit_rate_fleet": fleet.get("prefix_hit_rate"),
        "ttft_p50_plan": p.get("ttft_p50_s"), "ttft_p50_fleet": f.get("ttft_p50_s"),
        "requests_plan": p["requests"], "requests_fleet": f["requests"], "unfinished_fleet": f["unfinished"],
        "replicas_started_plan": p["replicas_started"], "replicas_started_fleet": len(fleet["replicas"]),
        "controller_armed_late_s": fleet.get("controller_armed_late_s"),
        "controller_rearmed_by_s": fleet.get("controller_rearmed_by_s"),
        "resilience": _resilience(p.get("router") or {}, fleet) if fleet.get("replica_faults") else None,
        "canary": _canary(plan, fleet) if fleet.get("canary") else None,
        "sessions": _sessions(p.get("sessions"), fleet.get("sessions") or _sessions_from_records(out, router, fleet)
                              if p.get("sessions") else None),
        "hedging": _hedging(p, fleet) if fleet.get("hedging") else None,
        "shadow": _shadow(plan["shadow"], fleet["shadow"], p, fleet["outcome"]) if fleet.get("shadow") else None,
        "fallback": _fallback(plan["fallback"], fleet["fallback"]) if fleet.get("fallback") else None,
        "windows": windows,
    }


def _canary(plan: dict, fleet: dict) -> dict:
    """With --canary-weight: per version (the primary's share and the canary's), the share of requests it got,
    its SLO attainment (plan minus fleet, in points), p50/p99 TTFT and E2E over its requests, and per window
    the canary's p99 TTFT."""
    versions = {}
    for version, planned in (("primary", plan["plan"]), ("canary", plan["canary"])):
        measured = fleet["canary"][version]
        # the plan's attainment: the median over its split's draws (plan.json's, when it drew more than one)
        spread = (plan["canary"].get("attainment_over_splits") or {}).get(version) or {}
        predicted = spread.get("median", planned["attainment"])
        row = {"share_plan": planned["requests"] / plan["canary"]["both"]["requests"], "share_fleet": measured["share"],
               "requests_plan": planned["requests"], "requests_fleet": measured["requests"],
               "attainment_plan": predicted, "attainment_fleet": measured["attainment"],
               "attainment_plan_one_draw": planned["attainment"], "attainment_plan_draws": spread or None,
               "attainment_points": None if predicted is None or measured["attainment"] is None
               else 100 * (predicted - measured["attainment"])}
        for key in ("ttft_p50_s", "ttft_p99_s", "e2e_p50_s", "e2e_p99_s"):
            row[f"{key}_plan"], row[f"{key}_fleet"] = planned.get(key), measured.get(key)
            row[f"{key}_err"] = _rel(planned.get(key), measured.get(key))
        versions[version] = row
    measured = {w["start_s"]: w for w in fleet["canary"]["canary"]["windows"]}
    versions["canary"]["windows"] = [
        {"start_s": w["start_s"], "requests_plan": w["requests"], "requests_fleet": measured[w["start_s"]]["requests"],
         "ttft_p99_plan": _p99(w["ttft_p99_s"]), "ttft_p99_fleet": _p99(measured[w["start_s"]]["ttft_p99_s"]),
         "met_plan": w["met"], "met_fleet": measured[w["start_s"]]["met"]}
        for w in plan["canary"]["windows"] if w["start_s"] in measured]
    return versions


def _shadow(planned: dict, measured: dict, production_plan: dict, production_fleet: dict) -> dict:
    """With --shadow-fraction: the shadow's load (the copies it served; the plan's copies against those its
    engines finished, target within 5%) and p99 (engines' clock, target within 15%), and production's p99
    TTFT planned and measured (the plan's production is the plan without a shadow)."""
    row = {"copies_plan": planned["requests"], "copies_fleet": measured["mirrored"],
           "copies_err": _rel(planned["requests"], measured["mirrored"])}
    for key in ("ttft_p50_s", "ttft_p99_s", "e2e_p99_s", "tpot_p50_s"):
        row[f"{key}_plan"], row[f"{key}_fleet"] = planned.get(key), measured.get(key)
        row[f"{key}_err"] = _rel(planned.get(key), measured.get(key))
    row["production_ttft_p99_plan"] = production_plan.get("ttft_p99_s")
    row["production_ttft_p99_fleet"] = production_fleet.get("ttft_p99_s")
    return row


def _fallback(planned: dict, measured: dict) -> dict:
    """With --fallback: per tier, its share of the requests (plan minus fleet, in points) and its p50/p99 TTFT;
    the requests that left when the primary was full and after its error."""
    row = {"rule": measured["rule"]}
    for key in ("left_full", "left_errors"):
        row[f"{key}_plan"], row[f"{key}_fleet"] = planned[key], measured[key]
    for tier in ("primary", "fallback"):
        p, f = planned["tiers"][tier], measured["tiers"][tier]
        row[tier] = {"share_plan": p["share"], "share_fleet": f["share"], "share_points": 100 * (p["share"] - f["share"]),
                     "requests_plan": p["requests"], "requests_fleet": f["requests"]}
        for key in ("ttft_p50_s", "ttft_p99_s", "e2e_p99_s"):
            row[tier][f"{key}_plan"], row[tier][f"{key}_fleet"] = p.get(key), f.get(key)
            row[tier][f"{key}_err"] = _rel(p.get(key), f.get(key))
    return row


def _hedging(planned: dict, fleet: dict) -> dict:
    """With --hedge-after: the extra requests the policy sent (copies over requests), the share of copies kept,
    and the p99 TTFT over every request, plan against fleet."""
    ph, fh, outcome = planned["hedging"], fleet["hedging"], fleet["outcome"]
    row = {"after": fh["after"]}
    for key in ("extra_requests", "copies_kept_share", "hedged"):
        row[f"{key}_plan"], row[f"{key}_fleet"] = ph[key], fh[key]
    row["extra_requests_err"] = _rel(ph["extra_requests"], fh["extra_requests"])
    for key in ("ttft_p50_s", "ttft_p99_s", "e2e_p99_s"):
        row[f"{key}_plan"], row[f"{key}_fleet"] = planned.get(key), outcome.get(key)
        row[f"{key}_err"] = _rel(planned.get(key), outcome.get(key))
    return row


def _resilience(planned: dict, fleet: dict) -> dict:
    """With --replica-fault: the attempts each faulted replica answered with an error, plan against fleet (the
    fleet's from the replicas' own injected-fault counters), and the requests that ended in an error."""
    failing = {f"r{f['replica']}" for f in fleet["replica_faults"]}
    per_replica = {name: {"plan": planned.get("failed_at", {}).get(name, 0),
                          "fleet": fleet.get("injected_errors", {}).get(name, 0)} for name in sorted(failing)}
    for counts in per_replica.values():
        counts["err"] = _rel(counts["plan"], counts["fleet"])
    statuses = fleet.get("accounting", {}).get("by_status", {})
    return {"failed_attempts": per_replica, "breaker_opened_plan": planned.get("breaker_opened", {}),
            "errored_plan": planned.get("errored"), "errored_fleet": sum(n for s, n in statuses.items() if s != "ok"),
            "retries_plan": planned.get("retries")}


def _sessions_from_records(out: Path, router: str, fleet: dict) -> dict:
    """A fleet.json written before fleet.json had `sessions`: the same summary from its records, open to the
    last answer (the fleet's horizon is not in its file)."""
    from contract.records import read_records
    from servecap.fleet.replay_records import measured_sessions

    records = read_records(out / f"fleet-{router}" / "requests.jsonl")
    t0 = fleet["t0_unix"]
    last = max(r["t_start"] + r["e2e_s"] - t0 for r in records if r.get("e2e_s") is not None)
    return measured_sessions(records, t0, last)


def _sessions(planned: dict | None, measured: dict | None) -> dict | None:
    """Chained sessions: how many completed, a whole session's time at p50 and p90, and the sessions open at
    once (peak, mean), plan against fleet."""
    if not planned or not measured:
        return None
    out = {"sessions_plan": planned["sessions"], "sessions_fleet": measured["sessions"],
           "completed_plan": planned["completed"], "completed_fleet": measured["completed"]}
    for q in ("p50", "p90"):
        a, b = planned["completion_s"][q], measured["completion_s"][q]
        out.update({f"completion_{q}_s_plan": a, f"completion_{q}_s_fleet": b, f"completion_{q}_err": _rel(a, b)})
    for key in ("peak_open", "mean_open"):
        out.update({f"{key}_plan": planned[key], f"{key}_fleet": measured[key],
                    f"{key}_err": _rel(planned[key], measured[key])})
    return out


def compare(out: Path, routers: list[str]) -> dict:
    pairs = {router: compare_pair(out, router) for router in routers}
    result = {"pairs": pairs}
    rr = pairs.get("round_robin")
    for router, ca in pairs.items():   # each routing policy's gain over round robin, planned and measured
        if rr is None or router == "round_robin":
            continue
        gain = {side: 1 - ca[f"ttft_p50_{side}"] / rr[f"ttft_p50_{side}"] for side in ("plan", "fleet")}
        result[f"{router}_vs_round_robin"] = {
            "hit_rate_plan": ca["prefix_hit_rate_plan"], "hit_rate_fleet": ca["prefix_hit_rate_fleet"],
            "hit_rate_err": _rel(ca["prefix_hit_rate_plan"], ca["prefix_hit_rate_fleet"]),
            "rr_hit_rate_plan": rr["prefix_hit_rate_plan"], "rr_hit_rate_fleet": rr["prefix_hit_rate_fleet"],
            "ttft_p50_gain_plan": gain["plan"], "ttft_p50_gain_fleet": gain["fleet"],
            "ttft_p50_gain_err": _rel(gain["plan"], gain["fleet"])}
    return result


def _print(result: dict) -> None:
    for router, c in result["pairs"].items():
        if c["decision_intervals"]:
            print(f"\n{router}: {c['decision_intervals']} decision intervals, same ready count "
                  f"{c['same_ready_share']:.1%}, same count wanted {c['same_wanted_share']:.1%} (target >= 95%)")
        else:
            print(f"\n{router}: fixed pools, no autoscaler decisions")
        print(f"  windows >= {MIN_WINDOW_REQUESTS} requests: {c['windows_judged']}; median |error| p99 TTFT "
              f"{_pct(c['ttft_p99_median_abs_err'])}, TPOT {_pct(c['tpot_p99_median_abs_err'])}, "
              f"E2E {_pct(c['e2e_p99_median_abs_err'])} (target <= 15%)")
        print(f"  attainment plan {_pct(c['attainment_plan'])} fleet {_pct(c['attainment_fleet'])}: "
              f"{_points(c['attainment_points'])} (target within 3)")
        if c.get("resilience"):
            r = c["resilience"]
            for name, counts in r["failed_attempts"].items():
                print(f"  {name}: attempts answered with its fault plan {counts['plan']} fleet {counts['fleet']:g} "
                      f"({counts['err']:+.1%}; target within 10%); circuit opened (plan) "
                      f"{r['breaker_opened_plan'].get(name, 0)}x")
            print(f"  requests answered an error: plan {r['errored_plan']} fleet {r['errored_fleet']}; plan retries "
                  f"{r['retries_plan']}")
        sh = c.get("shadow")
        if sh:
            print(f"  shadow: copies plan {sh['copies_plan']} fleet {sh['copies_fleet']} ({sh['copies_err']:+.1%}; target "
                  f"within 5%); TTFT p99 {_ms(sh['ttft_p99_s_plan'])}/{_ms(sh['ttft_p99_s_fleet'])} "
                  f"({sh['ttft_p99_s_err']:+.1%}; target within 15%), E2E p99 {_ms(sh['e2e_p99_s_plan'])}/"
                  f"{_ms(sh['e2e_p99_s_fleet'])} ({sh['e2e_p99_s_err']:+.1%}); production TTFT p99 plan "
                  f"{_ms(sh['production_ttft_p99_plan'])} fleet {_ms(sh['production_ttft_p99_fleet'])}")
        fb = c.get("fallback")
        if fb:
            print(f"  fallback ({fb['rule']}): left when full plan {fb['left_full_plan']} fleet {fb['left_full_fleet']}, "
                  f"after an error plan {fb['left_errors_plan']} fleet {fb['left_errors_fleet']}")
            for tier in ("primary", "fallback"):
                t = fb[tier]
                print(f"    {tier}: share plan {t['share_plan']:.1%} fleet {t['share_fleet']:.1%} "
                      f"({_points(t['share_points'])}; target within 5); TTFT p99 {_ms(t['ttft_p99_s_plan'])}/"
                      f"{_ms(t['ttft_p99_s_fleet'])} ({t['ttft_p99_s_err']:+.1%}), p50 {_ms(t['ttft_p50_s_plan'])}/"
                      f"{_ms(t['ttft_p50_s_fleet'])}")
        h = c.get("hedging")
        if h:
            print(f"  hedging after {h['after']}: extra requests plan {_pct(h['extra_requests_plan'])} fleet "
                  f"{_pct(h['extra_requests_fleet'])} ({h['extra_requests_err']:+.1%}; target within 10%); copies kept "
                  f"plan {_pct(h['copies_kept_share_plan'])} fleet {_pct(h['copies_kept_share_fleet'])}; TTFT p99 "
                  f"{_ms(h['ttft_p99_s_plan'])}/{_ms(h['ttft_p99_s_fleet'])} ({h['ttft_p99_s_err']:+.1%}; target "
                  f"within 15%), p50 {_ms(h['ttft_p50_s_plan'])}/{_ms(h['ttft_p50_s_fleet'])}")
        for version, v in (c.get("canary") or {}).items():
            draws = v.get("attainment_plan_draws")
            spread = (f" (median of {draws['draws']} draws, {_pct(draws['min'])} to {_pct(draws['max'])}; first draw "
                      f"{_pct(v['attainment_plan_one_draw'])})" if draws else "")
            print(f"  {version}: share plan {v['share_plan']:.1%} fleet {v['share_fleet']:.1%}; attainment plan "
                  f"{_pct(v['attainment_plan'])}{spread} fleet {_pct(v['attainment_fleet'])}: "
                  f"{_points(v['attainment_points'])} "
                  f"(target within 3); TTFT p99 {_ms(v['ttft_p99_s_plan'])}/{_ms(v['ttft_p99_s_fleet'])} "
                  f"({v['ttft_p99_s_err']:+.0%}), E2E p99 {_ms(v['e2e_p99_s_plan'])}/{_ms(v['e2e_p99_s_fleet'])} "
                  f"({v['e2e_p99_s_err']:+.0%})")
        for w in c["windows"]:
            print(f"    t={w['start_s']:>5.0f}s n={w['requests_fleet']:>4} TTFT p99 {w['ttft_p99_plan']:.3f}/"
                  f"{w['ttft_p99_fleet']:.3f} s ({w['ttft_err']:+.0%})  E2E p99 {w['e2e_p99_plan']:.2f}/"
                  f"{w['e2e_p99_fleet']:.2f} s ({w['e2e_err']:+.0%})  met {w['met_plan']}/{w['met_fleet']}")
    for router, c in result["pairs"].items():
        s = c.get("sessions")
        if s:
            print(f"\n{router} sessions: completed plan {s['completed_plan']}/{s['sessions_plan']} fleet "
                  f"{s['completed_fleet']}/{s['sessions_fleet']}; completion p50 {s['completion_p50_s_plan']:.1f}/"
                  f"{s['completion_p50_s_fleet']:.1f} s ({s['completion_p50_err']:+.1%}), p90 "
                  f"{s['completion_p90_s_plan']:.1f}/{s['completion_p90_s_fleet']:.1f} s ({s['completion_p90_err']:+.1%}); "
                  f"open at once: peak {s['peak_open_plan']}/{s['peak_open_fleet']}, mean {s['mean_open_plan']:.1f}/"
                  f"{s['mean_open_fleet']:.1f}")
    for name, versus in result.items():
        if not name.endswith("_vs_round_robin"):
            continue
        print(f"\n{name.replace('_vs_', ' vs ')}: hit rate plan {versus['hit_rate_plan']:.3f} fleet "
              f"{versus['hit_rate_fleet']:.3f} ({versus['hit_rate_err']:+.1%}); TTFT p50 gain plan "
              f"{versus['ttft_p50_gain_plan']:.1%} fleet {versus['ttft_p50_gain_fleet']:.1%} "
              f"({versus['ttft_p50_gain_err']:+.1%}) (target within 20%)")


def _pct(value) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _points(value) -> str:
    return "n/a" if value is None else f"{value:+.1f} points"


def _ms(value) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value * 1e3:,.0f} ms"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    shared = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="python -m lab.servecap.plan_vs_fleet", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--gpu", default="l4")
    p.add_argument("--model", default="llama-3.1-8b")
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--server-args", default="", help="more `servecap serve` flags for the fleet's replicas")
    p.add_argument("--routers", default="round_robin,cache_aware")
    p.add_argument("--compare-only", action="store_true")
    p.add_argument("--plans-only", action="store_true", help="run the plans again beside the fleets already there")
    p.add_argument("--plan-args", default="", help="more `servecap plan` flags, the plan's alone (e.g. --front-end RUN)")
    args = p.parse_args(own)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    routers = [r for r in args.routers.split(",") if r]
    if not args.compare_only:
        for router in routers:
            run_pair(out, router, args, shared, fleet_too=not args.plans_only)
    result = compare(out, routers)
    (out / "compare.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    _print(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
