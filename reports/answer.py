"""The report's first screen: the answer in words, then one row per strategy.

    sentences(summary) -> [str]          the overall answer, then one bullet per strategy
    strategy_rows(summary) -> DataFrame  strategy, max sustainable load, confidence, knee, cost

Pure: the typed summary in (contract.summary.Summary: its `verdict`, see reports.verdict). The answer
quotes the SLO row `all` when several limits are set (the one limit otherwise), compares strategies
by the request rate each sustains under it, and says what the confidence grade means once.
"""

from __future__ import annotations

import pandas as pd

from reports.verdict import MIN_COUNT_FOR_P99, answer_slo
from contract.slo import SLO
from contract.summary import Knee, Summary, SustainableRow

SLO_WORDS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "E2E"}
CONFIDENCE_MEANING = {
    "high": "the p99's 95% interval lies under every limit",
    "low": f"the p99 is under the limit but its 95% interval is not, or it rests on fewer than "
           f"{MIN_COUNT_FOR_P99} requests; measure longer to be sure",
}


def slo_phrase(slo: SLO) -> str:
    """"p99 TTFT ≤ 500 ms and p99 TPOT ≤ 50 ms"."""
    parts = [f"p99 {SLO_WORDS[name]} ≤ {value:g} ms" for name, value in slo.as_dict().items()
             if value is not None and name in SLO_WORDS]
    return " and ".join(parts)


def _rps(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _load(row: SustainableRow) -> str:
    return f"{_rps(row.request_rate_rps)} req/s ({row.output_tokens_per_s:.0f} output tokens/s)"


def _name(strategy: str) -> str:
    """How the answer names a curve: its strategy, or "the endpoint" for a --url run (strategy "-")."""
    return "the endpoint" if strategy == "-" else strategy


def _offered(level: str) -> str:
    """"continuous/c=8" -> "c=8"; a side-by-side --url run's "B: c=8" -> "c=8"."""
    return level.rpartition("/")[2].rpartition(": ")[2]


def _reason(text: str | None) -> str:
    """"ttft_s p99 190.6 ms > 100.0 ms" -> "p99 TTFT 190.6 ms > 100.0 ms"."""
    text = text or ""
    for column, word in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E")):
        text = text.replace(f"{column} p99", f"p99 {word}")
    return text


def setup_phrase(run: dict) -> str:
    """"on this setup (tiny on 2 x Intel Xeon ...)" ("" if run.json says nothing of it)."""
    detail = setup_detail(run)
    return f"on this setup ({detail})" if detail else ""


def setup_detail(run: dict) -> str:
    """"tiny on Intel Xeon, 2 cores, no GPU": the model and what it ran on, from run.json."""
    model = (run.get("server") or {}).get("model") or (run.get("target") or {}).get("url")
    host = run.get("host") or {}
    gpus = [g.get("name") if isinstance(g, dict) else g for g in host.get("gpus") or []]
    gpus = [g for g in gpus if isinstance(g, str)]
    if gpus:
        device = f"{len(gpus)} x {gpus[0]}" if len(gpus) > 1 else gpus[0]
    elif host.get("cpu_model"):
        device = f"{host['cpu_model']}" + (f", {host['cores']} cores" if host.get("cores") else "") + ", no GPU"
    else:
        device = None
    return " on ".join(part for part in (model, device) if part) + _speculation_detail(run)


def _speculation_detail(run: dict) -> str:
    """", speculating (ngram, k=4, exact acceptance)" when the server's /v1/engine said it speculates."""
    engines = (run.get("server") or {}).get("engines") or {}
    spec = next((e.get("speculative") for e in engines.values() if isinstance(e, dict) and e.get("speculative")), None)
    if not isinstance(spec, dict):
        return ""
    draft = f" of {spec['speculative_model']}" if spec.get("speculative_model") else ""
    return (f", speculating ({spec.get('method')}{draft}, k={spec.get('num_speculative_tokens')}, "
            f"{spec.get('mode', 'exact')} acceptance)")


def _answer_rows(summary: Summary) -> dict[str, SustainableRow]:
    """{strategy: its max_sustainable row under the answer's SLO}, in the verdict's order."""
    rows = summary.verdict.max_sustainable
    wanted = answer_slo(rows)
    return {row.strategy: row for row in rows if row.slo == wanted}


def _cost_text(cost: dict | None) -> str:
    if not cost or cost.get("usd_per_1m_output_tokens") is None:
        return ""
    return f"${cost['usd_per_1m_output_tokens']:.3f} per 1M output tokens"


def _ratios(best: str, rows: dict[str, SustainableRow]) -> str:
    """"6.7x what none sustains, 1.8x static"; strategies sustaining nothing are named as such."""
    top = rows[best].request_rate_rps
    parts, nothing = [], []
    for strategy, row in sorted(rows.items(), key=lambda item: item[1].request_rate_rps or 0):
        if strategy == best:
            continue
        if not row.level or not row.request_rate_rps:
            nothing.append(_name(strategy))
        else:
            ratio = top / row.request_rate_rps
            parts.append(f"{ratio:.2f}x {_name(strategy)}" if ratio < 1.1 else f"{ratio:.1f}x {_name(strategy)}")
    if parts:
        parts[0] = parts[0].replace("x ", "x what ", 1) + " sustains"
    if nothing:
        parts.append(f"{' and '.join(nothing)} {'meets' if len(nothing) == 1 else 'meet'} the SLOs at no level")
    return ", ".join(parts)


def session_sentence(level, spec: str | None) -> str | None:
    """A --session run's answer in sessions: "That is **8 agent sessions at once** (...): a completed one took
    ... s at p50 (... at p99), ...% of it waiting on tools." None for a level without sessions."""
    sessions = getattr(level, "sessions", None)
    if sessions is None or not sessions.sessions:
        return None
    users = _offered(level.level).removeprefix("c=")
    text = f"That is **{users} agent sessions at once**" + (f" (`--session {spec}`)" if spec else "")
    if sessions.completion_s.p50 is not None:
        text += (f": a completed session took {sessions.completion_s.p50:.2f} s at p50 "
                 f"({sessions.completion_s.p99:.2f} s at p99)")
        if sessions.tool_wait_share is not None:
            text += f", {sessions.tool_wait_share:.0%} of it waiting on tools"
    if sessions.failed:
        text += f"; {sessions.failed} of {sessions.sessions} sessions failed part-way"
    return text + ". What a longer tool wait or a bigger system prompt does to it: `servecap calc simulate --session`."


def _strategy_sentence(strategy: str, row: SustainableRow, knee: Knee | None, cost: dict | None) -> str:
    if row.level:
        text = f"**{_name(strategy)}**: up to {_offered(row.level)}, {_load(row)}, {row.confidence} confidence"
        if row.first_failing_level:
            text += f"; {_offered(row.first_failing_level)} breaks it ({_reason(row.failing_reason)})"
        else:
            text += "; every level measured meets the SLOs, so the limit lies beyond the highest one"
    else:
        text = (f"**{_name(strategy)}**: no level meets the SLOs; already at {_offered(row.first_failing_level)}: "
                f"{_reason(row.failing_reason)}")
    if knee:
        text += f". Knee at {_offered(knee.level)} ({knee.output_tokens_per_s:.0f} output tokens/s)"
    cost_text = _cost_text(cost)
    if cost_text:
        text += f". {cost_text} at its max sustainable load"
    return "- " + text + "."


def sentences(summary: Summary) -> list[str]:
    verdict = summary.verdict
    rows = _answer_rows(summary)
    setup = setup_phrase(summary.run)
    if not rows:  # no SLO given: the knees answer
        knees = {s: k for s, k in verdict.knee.items() if k}
        lines = ["No SLO was given, so there is no max sustainable load; rerun `servecap report RUN_DIR "
                 "--slo-ttft-ms MS --slo-tpot-ms MS` (or the sweep with them) for one."]
        if knees:
            best = max(knees, key=lambda s: knees[s].output_tokens_per_s)
            lines.append(f"Highest knee of the throughput-latency curve: **{_name(best)}** at "
                         f"{_offered(knees[best].level)}, {knees[best].output_tokens_per_s:.0f} output tokens/s.")
        return lines
    phrase = slo_phrase(verdict.slo)
    meeting = {s: r for s, r in rows.items() if r.level and r.request_rate_rps}
    lines = []
    if meeting:
        best = max(meeting, key=lambda s: meeting[s].request_rate_rps)
        row = meeting[best]
        lead = "**The endpoint**" if best == "-" else \
            f"**{best}**" + (" batching" if best in ("continuous", "static", "dynamic") else "")
        text = f"{lead} sustains **{_load(row)}** at {phrase}{' ' + setup if setup else ''}, " \
               f"with {row.confidence} confidence"
        if len(rows) > 1:
            text += ": " + _ratios(best, rows)
        elif row.first_failing_level:
            text += f" (up to {_offered(row.level)}; {_offered(row.first_failing_level)} breaks it: " \
                    f"{_reason(row.failing_reason)})"
        cost_text = _cost_text(verdict.cost_by_strategy.get(best))
        lines.append(text + "." + (f" That costs **{cost_text}**." if cost_text else ""))
        level = next((lvl for lvl in summary.levels if lvl.level == row.level), None)
        sessions = session_sentence(level, (summary.run.get("workload") or {}).get("session"))
        if sessions:
            lines.append(sessions)
    else:
        lines.append(f"No strategy meets {phrase} at any measured level{' ' + setup if setup else ''}.")
    cost = verdict.cost
    if "unavailable" in cost and meeting:
        lines.append(f"Cost per 1M tokens: not known ({cost['unavailable']}).")
    if len(rows) > 1 or not meeting:
        costs = verdict.cost_by_strategy
        lines += [_strategy_sentence(s, r, verdict.knee.get(s), costs.get(s)) for s, r in rows.items()]
    confidences = {r.confidence for r in rows.values() if r.confidence}
    lines += [f"*{grade.capitalize()} confidence*: {CONFIDENCE_MEANING[grade]}." for grade in
              ("high", "low") if grade in confidences]
    return lines


def strategy_rows(summary: Summary) -> pd.DataFrame:
    """One row per strategy: what it sustains under the answer's SLO, where it breaks, its knee and cost."""
    verdict = summary.verdict
    rows = _answer_rows(summary)
    costs = verdict.cost_by_strategy
    out = []
    for strategy in dict.fromkeys([*rows, *verdict.knee]):
        row, knee = rows.get(strategy), verdict.knee.get(strategy)
        out.append({
            "strategy": _name(strategy),
            "max sustainable": (_offered(row.level) if row.level else "none") if row else "(no SLO)",
            "req/s": _rps(row.request_rate_rps) if row and row.level else "",
            "output tok/s": f"{row.output_tokens_per_s:.0f}" if row and row.level else "",
            "confidence": (row.confidence or "") if row else "",
            "breaks at": (f"{_offered(row.first_failing_level)}: {_reason(row.failing_reason)}"
                          if row and row.first_failing_level else ""),
            "knee": f"{_offered(knee.level)} ({knee.output_tokens_per_s:.0f} tok/s)" if knee else "",
            "$ per 1M output tokens": (f"{costs[strategy]['usd_per_1m_output_tokens']:.3f}"
                                       if costs.get(strategy, {}).get("usd_per_1m_output_tokens") is not None else ""),
        })
    return pd.DataFrame(out)
