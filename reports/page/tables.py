"""The report's tables as pandas DataFrames, built from the typed summary (contract.summary.Summary), so
Markdown and HTML agree."""

from __future__ import annotations

import pandas as pd

from contract.level_result import Distribution, LagLimited, Offered, PercentilePair, ServerHistogram
from contract.summary import Summary

LATENCY_COLUMNS = ("ttft_s", "tpot_s", "itl_s", "e2e_s", "ttfa_s", "queue_s", "e2e_with_queue_s")


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value * 1000:.1f}"


def _ci_ms(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f"[{ci[0] * 1000:.1f}, {ci[1] * 1000:.1f}]"


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "" if value is None else fmt.format(value)


def _offered(offered: Offered | None) -> str:
    if not offered:
        return ""
    return f"c={offered.value}" if offered.kind == "concurrency" else f"{offered.value:g} req/s"


def verdict_table(summary: Summary) -> pd.DataFrame:
    """Max sustainable load per strategy and SLO at p99, with confidence."""
    rows = []
    for row in summary.verdict.max_sustainable:
        rows.append({
            "strategy": row.strategy, "SLO": row.slo,
            "limit (ms)": _ms(row.limit_s) if row.limit_s else "every SLO",
            "max sustainable level": row.level or "none meets it",
            "offered": _offered(row.offered),
            "req/s": _num(row.request_rate_rps), "output tok/s": _num(row.output_tokens_per_s, "{:.1f}"),
            "p99 (ms)": _ms(row.p99_s), "p99 95% CI (ms)": _ci_ms(row.p99_ci95),
            "confidence": row.confidence or "",
            "highest level with CI under limit": row.confident_level or "",
            "first failing level": row.first_failing_level or "",
            "SLO crossed at (interpolated)": "" if not row.interpolated else
            f"load {row.interpolated.offered_load:.3g}, {row.interpolated.output_tokens_per_s:.1f} tok/s",
            "why it fails": row.failing_reason or "",
        })
    return pd.DataFrame(rows)


def knee_table(summary: Summary) -> pd.DataFrame:
    rows = []
    for strategy, knee in summary.verdict.knee.items():
        rows.append({"strategy": strategy, "knee level": knee.level if knee else "n/a (< 3 levels or flat)",
                     "output tok/s": _num(knee.output_tokens_per_s, "{:.1f}") if knee else "",
                     "req/s": _num(knee.request_rate_rps) if knee else "",
                     "p99 e2e (ms)": _ms(knee.p99_s) if knee else ""})
    return pd.DataFrame(rows)


def _p50_p99(pair: Distribution | PercentilePair) -> str:
    """"12.3 / 45.6": a Distribution's or a PercentilePair's p50 and p99, in ms."""
    return f"{_ms(pair.p50)} / {_ms(pair.p99)}"


def levels_table(summary: Summary) -> pd.DataFrame:
    """One row per level: load, rates, goodput and the headline percentiles."""
    rows = []
    for lvl in summary.levels:
        rows.append({
            "level": lvl.level, "requests": lvl.requests, "errors": lvl.errors,
            "in flight at stop": lvl.incomplete,
            "req/s": _num(lvl.request_rate_rps), "output tok/s": _num(lvl.output_tokens_per_s, "{:.1f}"),
            "goodput req/s": _num(lvl.goodput_rps),
            "TTFT p50/p99 (ms)": _p50_p99(lvl.metrics["ttft_s"]),
            "TPOT p50/p99 (ms)": _p50_p99(lvl.metrics["tpot_s"]),
            "ITL p99 (ms)": _ms(lvl.metrics["itl_s"].p99),
            "E2E p50/p99 (ms)": _p50_p99(lvl.metrics["e2e_s"]),
            **_with_queue(lvl.metric("e2e_with_queue_s")),
            "loop lag p99 (ms)": _num(lvl.loadgen.loop_lag_p99_ms, "{:.2f}"),
        })
    return pd.DataFrame(rows)


def _with_queue(queued: Distribution) -> dict:
    """E2E from the intended send time, next to E2E from the actual one (coordinated omission)."""
    if not queued.count:
        return {"E2E incl. queue p50/p99 (ms)": ""}
    return {"E2E incl. queue p50/p99 (ms)": _p50_p99(queued)}


def turn_table(summary: Summary) -> pd.DataFrame:
    """Multi-turn runs: latency per level and turn (each turn sends the whole history so far)."""
    rows = []
    for lvl in summary.levels:
        for turn, t in (lvl.by_turn or {}).items():
            rows.append({"level": lvl.level, "turn": turn, "requests": t.requests,
                         "prompt tokens mean": _num(t.prompt_tokens_mean, "{:.0f}"),
                         "prefix-cache hits": "" if t.cached_share is None else f"{t.cached_share:.0%}",
                         "TTFT p50/p99 (ms)": _p50_p99(t.ttft_s), "TPOT p50/p99 (ms)": _p50_p99(t.tpot_s),
                         "E2E p50/p99 (ms)": _p50_p99(t.e2e_s)})
    return pd.DataFrame(rows)


def session_table(summary: Summary) -> pd.DataFrame:
    """--session runs: per level, the sessions begun, finished, failed and cut, how long a finished one took
    and its share waiting on tools (reports.sessions)."""
    rows = []
    for lvl in summary.levels:
        s = lvl.sessions
        if s is None:
            continue
        rows.append({"level": lvl.level, "sessions": s.sessions, "completed": s.completed, "failed": s.failed,
                     "cut at the end": s.cut, "completion p50/p99 (s)": _p50_p99_s(s.completion_s),
                     "waiting on tools": "" if s.tool_wait_share is None else f"{s.tool_wait_share:.0%}",
                     "requests / session": _num(s.requests_mean, "{:.1f}"),
                     "tool calls / session": _num(s.tool_calls_mean, "{:.1f}"),
                     "rounds without a call": s.uncalled_rounds})
    return pd.DataFrame(rows)


def hedge_table(summary: Summary) -> pd.DataFrame:
    """--hedge-after runs: per level, the requests hedged, the copies kept and the load the copies added."""
    rows = []
    for lvl in summary.levels:
        h = lvl.hedging
        if h is None:
            continue
        rows.append({"level": lvl.level, "requests": h.requests, "hedged": h.hedged,
                     "hedged share": "" if h.hedged_share is None else f"{h.hedged_share:.0%}",
                     "copy kept": h.copies_kept, "cancelled": h.cancelled,
                     "extra requests": "" if h.extra_requests is None else f"+{h.extra_requests:.0%}",
                     "TTFT p50/p99 (ms)": _p50_p99(lvl.metrics["ttft_s"]) if "ttft_s" in lvl.metrics else ""})
    return pd.DataFrame(rows)


def policy_table(summary: Summary) -> pd.DataFrame:
    """A fleet run's traffic policies (contract.fleet_policies): per policy and part, the requests it took, their
    share, its attainment and latency, its replicas, and the run's accounting (each request once)."""
    rows = [{"policy": r.policy, "part": r.part, "requests": r.requests,
             "share": "" if r.share is None else f"{r.share:.1%}",
             "windows meeting the SLO": "" if r.attainment is None else f"{r.attainment:.1%}",
             "TTFT p50 (ms)": _ms(r.ttft_p50_s), "TTFT p99 (ms)": _ms(r.ttft_p99_s), "E2E p99 (ms)": _ms(r.e2e_p99_s),
             "replicas": "" if r.replicas is None else r.replicas, "note": r.note} for r in summary.policies or ()]
    return pd.DataFrame(rows)


def _p50_p99_s(pair) -> str:
    return "" if pair.p50 is None else f"{pair.p50:.2f} / {pair.p99:.2f}"


def model_table(summary: Summary) -> pd.DataFrame:
    """Multi-model runs (--model-mix): latency per level and model, with the share that waited for a LoRA slot."""
    rows = []
    for lvl in summary.levels:
        for model, m in (lvl.by_model or {}).items():
            wait = m.slot_wait
            rows.append({"level": lvl.level, "model": model, "requests": m.requests,
                         "TTFT p50/p99 (ms)": _p50_p99(m.ttft_s), "TPOT p50/p99 (ms)": _p50_p99(m.tpot_s),
                         "E2E p50/p99 (ms)": _p50_p99(m.e2e_s),
                         "waited for a slot": "" if not wait else f"{wait.waited_share:.0%}",
                         "slot wait mean / p99 (ms)": "" if not wait else f"{_ms(wait.mean_s)} / {_ms(wait.p99_s)}"})
    return pd.DataFrame(rows)


def slot_wait_sentences(summary: Summary) -> list[str]:
    """One line per level whose requests waited for a LoRA adapter slot: how many, how long, what it cost."""
    lines = []
    for lvl in summary.levels:
        waits = lvl.lora_slot_waits
        if not waits or not waits.waited_share:
            continue
        cost = ""
        if waits.ttft_p50_waited_s is not None and waits.ttft_p50_not_waited_s is not None:
            cost = (f"; TTFT p50 {_ms(waits.ttft_p50_waited_s)} ms for those, "
                    f"{_ms(waits.ttft_p50_not_waited_s)} ms for the rest")
        lines.append(f"{lvl.level}: {waits.waited_share:.0%} of requests waited for a LoRA adapter slot "
                     f"(p50 {_ms(waits.wait_p50_s)} ms, p99 {_ms(waits.wait_p99_s)} ms of those){cost}.")
    return lines


def latency_table(summary: Summary, metric: str) -> pd.DataFrame:
    rows = []
    for lvl in summary.levels:
        s = lvl.metrics.get(metric)
        if s is None:   # a summary from before the metric existed
            continue
        rows.append({"level": lvl.level, "count": s.count, "mean (ms)": _ms(s.mean),
                     "p50": _ms(s.p50), "p90": _ms(s.p90), "p95": _ms(s.p95), "p99": _ms(s.p99),
                     "p99 95% CI": _ci_ms(s.p99_ci95), "CI method": s.ci_method or ""})
    return pd.DataFrame(rows)


def _lag_names(limited: tuple[LagLimited, ...]) -> str:
    return ", ".join(f"{row.metric.removesuffix('_s').upper()} {row.q}" for row in limited)


def health_table(summary: Summary) -> pd.DataFrame:
    """Load-generator health per level: send lateness (open loop) and workers."""
    rows = []
    for lvl in summary.levels:
        h = lvl.loadgen
        late = h.late
        lags = (h.loop_lag_p50_ms, h.loop_lag_p99_ms, h.loop_lag_max_ms)
        rows.append({"level": lvl.level, "workers": h.workers,
                     "lateness p50 (ms)": _num(h.lateness_p50_ms, "{:.3f}"),
                     "lateness p99 (ms)": _num(h.lateness_p99_ms, "{:.3f}"),
                     "lateness max (ms)": _num(h.lateness_max_ms, "{:.3f}"),
                     "loop lag p50/p99/max (ms)": " / ".join(_num(lag, "{:.2f}") for lag in lags)
                     if h.loop_lag_p99_ms is not None else "",
                     "generator CPU max %": _num(h.cpu_max_pct, "{:.0f}"),
                     "verdict": "LIMITED BY LOAD GENERATOR" if late or h.limited_by_loadgen
                     else (f"loop lag > CI of {_lag_names(h.lag_limited)}" if h.lag_limited
                           else ("ok" if late is not None or h.limited_by_loadgen is not None else ""))})
    return pd.DataFrame(rows)


def resources_table(summary: Summary) -> pd.DataFrame:
    """Server-side means (server_metrics.csv) and device means (samples.csv) per level."""
    rows = []
    for lvl in summary.levels:
        s, row = lvl.server, {"level": lvl.level}
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
        for source, d in lvl.device.items():
            row[f"{source} util %"] = _num(d.get("util_pct"), "{:.1f}")
            row[f"{source} mem GiB"] = _num((d.get("mem_used_bytes") or 0) / 2**30) if d.get("mem_used_bytes") else ""
            if d.get("power_w") is not None:
                row[f"{source} power W"] = _num(d["power_w"], "{:.0f}")
        row["J/output token"] = _num(lvl.energy_per_output_token_j, "{:.3f}")
        rows.append(row)
    return pd.DataFrame(rows).fillna("")


def predicted_table(summary: Summary) -> pd.DataFrame:
    """Predicted vs measured per level and quantity, with relative error (predicted / measured - 1)."""
    rows = []
    for lvl in summary.levels:
        comparisons = (lvl.predicted.comparisons if lvl.predicted else None) or {}
        for quantity, pair in comparisons.items():
            rel = pair.relative_error
            rows.append({"level": lvl.level, "quantity": quantity,
                         "predicted": _num(pair.predicted, "{:.4g}"),
                         "measured": _num(pair.measured, "{:.4g}"),
                         "relative error": "" if rel is None else f"{rel:+.1%}",
                         "unit": pair.unit if pair.unit is not None else ""})
    return pd.DataFrame(rows)


def _bucketed_ms(entry: ServerHistogram | None, pct: str) -> str:
    """`12.3 [10, 20]`: the interpolated percentile and the bucket it is known to lie in (ms)."""
    if entry is None:
        return ""
    value, bucket = entry.at(pct), entry.bucket(pct)
    if value is None:
        return ""
    if not bucket:
        return _ms(value)
    hi = "inf" if bucket[1] is None or bucket[1] == float("inf") else f"{bucket[1] * 1000:g}"
    return f"{_ms(value)} [{bucket[0] * 1000:g}, {hi}]"


def client_server_table(summary: Summary) -> pd.DataFrame:
    """Per level: the client's TTFT and E2E next to the server's (p50 with its bucket, and the mean), the
    difference (client + network + front end), and the mean TTFT split into overhead, front end, queue, prefill."""
    rows = []
    for lvl in summary.levels:
        pairs, server = lvl.client_vs_server, lvl.server_latency
        if not server:
            continue
        row = {"level": lvl.level, "engine": lvl.server.get("engine") or ""}
        for pair, histogram, label in ((pairs and pairs.ttft_s, server.get("ttft_s"), "TTFT"),
                                       (pairs and pairs.e2e_s, server.get("e2e_s"), "E2E")):
            share = pair.overhead_share_mean if pair else None
            row[f"{label} p50 client / server [bucket] (ms)"] = (
                f"{_ms(pair.client_p50)} / {_bucketed_ms(histogram, 'p50')}" if pair else "")
            row[f"{label} mean client / server (ms)"] = (
                f"{_ms(pair.client_mean)} / {_ms(pair.server_mean)}" if pair else "")
            row[f"{label} overhead, mean (ms)"] = (_ms(pair.overhead_mean if pair else None)
                                                   + (f" ({share:.0%})" if share is not None else ""))
        split = pairs.ttft_split_mean if pairs else None
        row["mean TTFT = overhead + front end + queue + prefill (ms)"] = (
            " + ".join(_ms(part) or "?" for part in (split.overhead_s, split.front_end_s, split.queue_s,
                                                     split.prefill_s)) if split else "")
        rows.append(row)
    return pd.DataFrame(rows)
