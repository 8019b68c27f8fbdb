"""The report's tables as pandas DataFrames, built from summary.json's dict (so Markdown and HTML agree)."""

from __future__ import annotations

import pandas as pd

LATENCY_COLUMNS = ("ttft_s", "tpot_s", "itl_s", "e2e_s", "ttfa_s", "queue_s", "e2e_with_queue_s")


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value * 1000:.1f}"


def _ci_ms(ci: list[float] | None) -> str:
    return "" if ci is None else f"[{ci[0] * 1000:.1f}, {ci[1] * 1000:.1f}]"


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "" if value is None else fmt.format(value)


def _offered(offered: dict | None) -> str:
    if not offered:
        return ""
    (kind, value), = offered.items()
    return f"c={value}" if kind == "concurrency" else f"{value:g} req/s"


def verdict_table(summary: dict) -> pd.DataFrame:
    """Max sustainable load per strategy and SLO at p99, with confidence."""
    rows = []
    for row in summary["verdict"]["max_sustainable"]:
        rows.append({
            "strategy": row["strategy"], "SLO": row["slo"],
            "limit (ms)": _ms(row["limit_s"]) if row["limit_s"] else "every SLO",
            "max sustainable level": row["level"] or "none meets it",
            "offered": _offered(row["offered"]),
            "req/s": _num(row["request_rate_rps"]), "output tok/s": _num(row["output_tokens_per_s"], "{:.1f}"),
            "p99 (ms)": _ms(row["p99_s"]), "p99 95% CI (ms)": _ci_ms(row["p99_ci95"]),
            "confidence": row["confidence"] or "",
            "highest level with CI under limit": row["confident_level"] or "",
            "first failing level": row["first_failing_level"] or "",
            "SLO crossed at (interpolated)": "" if not row.get("interpolated") else
            f"load {row['interpolated']['offered_load']:.3g}, {row['interpolated']['output_tokens_per_s']:.1f} tok/s",
            "why it fails": row["failing_reason"] or "",
        })
    return pd.DataFrame(rows)


def knee_table(summary: dict) -> pd.DataFrame:
    rows = []
    for strategy, knee in summary["verdict"]["knee"].items():
        rows.append({"strategy": strategy, "knee level": knee["level"] if knee else "n/a (< 3 levels or flat)",
                     "output tok/s": _num(knee["output_tokens_per_s"], "{:.1f}") if knee else "",
                     "req/s": _num(knee["request_rate_rps"]) if knee else "",
                     "p99 e2e (ms)": _ms(knee["p99_s"]) if knee else ""})
    return pd.DataFrame(rows)


def levels_table(summary: dict) -> pd.DataFrame:
    """One row per level: load, rates, goodput and the headline percentiles."""
    rows = []
    for lvl in summary["levels"]:
        m = lvl["metrics"]
        rows.append({
            "level": lvl["level"], "requests": lvl["requests"], "errors": lvl["errors"],
            "in flight at stop": lvl.get("incomplete", 0),
            "req/s": _num(lvl["request_rate_rps"]), "output tok/s": _num(lvl["output_tokens_per_s"], "{:.1f}"),
            "goodput req/s": _num(lvl["goodput_rps"]),
            "TTFT p50/p99 (ms)": f"{_ms(m['ttft_s']['p50'])} / {_ms(m['ttft_s']['p99'])}",
            "TPOT p50/p99 (ms)": f"{_ms(m['tpot_s']['p50'])} / {_ms(m['tpot_s']['p99'])}",
            "ITL p99 (ms)": _ms(m["itl_s"]["p99"]),
            "E2E p50/p99 (ms)": f"{_ms(m['e2e_s']['p50'])} / {_ms(m['e2e_s']['p99'])}",
            **_with_queue(m),
            "loop lag p99 (ms)": _num(lvl["loadgen"].get("loop_lag_p99_ms"), "{:.2f}"),
        })
    return pd.DataFrame(rows)


def _with_queue(metrics: dict) -> dict:
    """E2E from the intended send time, next to E2E from the actual one (coordinated omission)."""
    queued = metrics.get("e2e_with_queue_s") or {}
    if not queued.get("count"):
        return {"E2E incl. queue p50/p99 (ms)": ""}
    return {"E2E incl. queue p50/p99 (ms)": f"{_ms(queued['p50'])} / {_ms(queued['p99'])}"}


def turn_table(summary: dict) -> pd.DataFrame:
    """Multi-turn runs: latency per level and turn (each turn sends the whole history so far)."""
    rows = []
    for lvl in summary["levels"]:
        for turn, t in (lvl.get("by_turn") or {}).items():
            rows.append({"level": lvl["level"], "turn": turn, "requests": t["requests"],
                         "prompt tokens mean": _num(t["prompt_tokens_mean"], "{:.0f}"),
                         **{f"{name} p50/p99 (ms)": f"{_ms(t[metric]['p50'])} / {_ms(t[metric]['p99'])}"
                            for name, metric in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("E2E", "e2e_s"))}})
    return pd.DataFrame(rows)


def model_table(summary: dict) -> pd.DataFrame:
    """Multi-model runs (--model-mix): latency per level and model, with the share that waited for a LoRA slot."""
    rows = []
    for lvl in summary["levels"]:
        for model, m in (lvl.get("by_model") or {}).items():
            wait = m.get("slot_wait") or {}
            rows.append({"level": lvl["level"], "model": model, "requests": m["requests"],
                         **{f"{name} p50/p99 (ms)": f"{_ms(m[metric]['p50'])} / {_ms(m[metric]['p99'])}"
                            for name, metric in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("E2E", "e2e_s"))},
                         "waited for a slot": "" if not wait else f"{wait['waited_share']:.0%}",
                         "slot wait mean / p99 (ms)": "" if not wait else
                         f"{_ms(wait['mean_s'])} / {_ms(wait['p99_s'])}"})
    return pd.DataFrame(rows)


def slot_wait_sentences(summary: dict) -> list[str]:
    """One line per level whose requests waited for a LoRA adapter slot: how many, how long, what it cost."""
    lines = []
    for lvl in summary["levels"]:
        waits = lvl.get("lora_slot_waits")
        if not waits or not waits["waited_share"]:
            continue
        cost = ""
        if waits["ttft_p50_waited_s"] is not None and waits["ttft_p50_not_waited_s"] is not None:
            cost = (f"; TTFT p50 {_ms(waits['ttft_p50_waited_s'])} ms for those, "
                    f"{_ms(waits['ttft_p50_not_waited_s'])} ms for the rest")
        lines.append(f"{lvl['level']}: {waits['waited_share']:.0%} of requests waited for a LoRA adapter slot "
                     f"(p50 {_ms(waits['wait_p50_s'])} ms, p99 {_ms(waits['wait_p99_s'])} ms of those){cost}.")
    return lines


def latency_table(summary: dict, metric: str) -> pd.DataFrame:
    rows = []
    for lvl in summary["levels"]:
        s = lvl["metrics"].get(metric)
        if s is None:   # a summary from before the metric existed
            continue
        rows.append({"level": lvl["level"], "count": s["count"], "mean (ms)": _ms(s["mean"]),
                     "p50": _ms(s["p50"]), "p90": _ms(s["p90"]), "p95": _ms(s["p95"]), "p99": _ms(s["p99"]),
                     "p99 95% CI": _ci_ms(s["p99_ci95"]), "CI method": s["ci_method"] or ""})
    return pd.DataFrame(rows)


def _lag_names(limited: list[dict]) -> str:
    return ", ".join(f"{row['metric'].removesuffix('_s').upper()} {row['q']}" for row in limited)


def health_table(summary: dict) -> pd.DataFrame:
    """Load-generator health per level: send lateness (open loop) and workers."""
    rows = []
    for lvl in summary["levels"]:
        h = lvl["loadgen"]
        late = h.get("late")
        rows.append({"level": lvl["level"], "workers": h["workers"],
                     "lateness p50 (ms)": _num(h.get("lateness_p50_ms"), "{:.3f}"),
                     "lateness p99 (ms)": _num(h.get("lateness_p99_ms"), "{:.3f}"),
                     "lateness max (ms)": _num(h.get("lateness_max_ms"), "{:.3f}"),
                     "loop lag p50/p99/max (ms)": " / ".join(_num(h.get(f"loop_lag_{q}_ms"), "{:.2f}")
                                                            for q in ("p50", "p99", "max"))
                     if h.get("loop_lag_p99_ms") is not None else "",
                     "generator CPU max %": _num(h.get("cpu_max_pct"), "{:.0f}"),
                     "verdict": "LIMITED BY LOAD GENERATOR" if late or h.get("limited_by_loadgen")
                     else (f"loop lag > CI of {_lag_names(h['lag_limited'])}" if h.get("lag_limited")
                           else ("ok" if late is not None or "limited_by_loadgen" in h else ""))})
    return pd.DataFrame(rows)


def resources_table(summary: dict) -> pd.DataFrame:
    """Server-side means (server_metrics.csv) and device means (samples.csv) per level."""
    rows = []
    for lvl in summary["levels"]:
        s, row = lvl["server"], {"level": lvl["level"]}
        row["running"] = _num(s.get("requests_running_mean"))
        row["waiting"] = _num(s.get("requests_waiting_mean"))
        row["batch size"] = _num(s.get("batch_size_mean"))
        row["KV used %"] = _num(s["kv_usage_mean"] * 100, "{:.1f}") if s.get("kv_usage_mean") is not None else ""
        row["step (ms)"] = _ms(s.get("step_time_mean_s"))
        row["tokens/step"] = _num(s.get("tokens_per_step_mean"))
        row["preemptions"] = _num(s.get("preemptions"), "{:.0f}")
        row["prefix hit %"] = _num(s["prefix_cache_hit_rate"] * 100, "{:.1f}") \
            if s.get("prefix_cache_hit_rate") is not None else ""
        if s.get("spec_acceptance_rate") is not None:   # speculative decoding, from the server's counters
            row["spec accept %"] = _num(s["spec_acceptance_rate"] * 100, "{:.1f}")
            row["accepted length"] = _num(s.get("spec_mean_accepted_length"), "{:.2f}")
        for source, d in lvl["device"].items():
            row[f"{source} util %"] = _num(d.get("util_pct"), "{:.1f}")
            row[f"{source} mem GiB"] = _num((d.get("mem_used_bytes") or 0) / 2**30) if d.get("mem_used_bytes") else ""
            if d.get("power_w") is not None:
                row[f"{source} power W"] = _num(d["power_w"], "{:.0f}")
        row["J/output token"] = _num(lvl.get("energy_per_output_token_j"), "{:.3f}")
        rows.append(row)
    return pd.DataFrame(rows).fillna("")


def predicted_table(summary: dict) -> pd.DataFrame:
    """Predicted vs measured per level and quantity, with relative error (predicted / measured - 1)."""
    rows = []
    for lvl in summary["levels"]:
        for quantity, pair in (lvl.get("predicted") or {}).get("comparisons", {}).items():
            rel = pair.get("relative_error")
            rows.append({"level": lvl["level"], "quantity": quantity,
                         "predicted": _num(pair.get("predicted"), "{:.4g}"),
                         "measured": _num(pair.get("measured"), "{:.4g}"),
                         "relative error": "" if rel is None else f"{rel:+.1%}",
                         "unit": pair.get("unit", "")})
    return pd.DataFrame(rows)


def _bucketed_ms(entry: dict, pct: str) -> str:
    """`12.3 [10, 20]`: the interpolated percentile and the bucket it is known to lie in (ms)."""
    value, bucket = entry.get(pct), entry.get(f"{pct}_bucket")
    if value is None:
        return ""
    if not bucket:
        return _ms(value)
    hi = "inf" if bucket[1] is None or bucket[1] == float("inf") else f"{bucket[1] * 1000:g}"
    return f"{_ms(value)} [{bucket[0] * 1000:g}, {hi}]"


def client_server_table(summary: dict) -> pd.DataFrame:
    """Per level: the client's TTFT and E2E next to the server's (p50 with its bucket, and the mean), the
    difference (client + network + front end), and the mean TTFT split into overhead, front end, queue, prefill."""
    rows = []
    for lvl in summary["levels"]:
        pairs, server = lvl.get("client_vs_server") or {}, lvl.get("server_latency") or {}
        if not server:
            continue
        row = {"level": lvl["level"], "engine": (lvl.get("server") or {}).get("engine") or ""}
        for metric, label in (("ttft_s", "TTFT"), ("e2e_s", "E2E")):
            pair = pairs.get(metric) or {}
            share = pair.get("overhead_share_mean")
            row[f"{label} p50 client / server [bucket] (ms)"] = (
                f"{_ms(pair.get('client_p50'))} / {_bucketed_ms(server.get(metric) or {}, 'p50')}" if pair else "")
            row[f"{label} mean client / server (ms)"] = (
                f"{_ms(pair.get('client_mean'))} / {_ms(pair.get('server_mean'))}" if pair else "")
            row[f"{label} overhead, mean (ms)"] = (_ms(pair.get("overhead_mean"))
                                                   + (f" ({share:.0%})" if share is not None else ""))
        split = pairs.get("ttft_split_mean") or {}
        row["mean TTFT = overhead + front end + queue + prefill (ms)"] = (
            " + ".join(_ms(split.get(k)) or "?" for k in ("overhead_s", "front_end_s", "queue_s", "prefill_s"))
            if split else "")
        rows.append(row)
    return pd.DataFrame(rows)
