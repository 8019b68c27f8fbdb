"""The gate's verdict as a Markdown table (for a pull-request comment or $GITHUB_STEP_SUMMARY) and as JSON."""

from __future__ import annotations

from reports.gate.decision import REGRESSION, UNDECIDED, UNDECIDED_TAIL, GateResult, GateRow, paired_advice
from reports.gate.thresholds import GATEABLE_LATENCY_METRICS


def _value(row: GateRow, value: float | None) -> str:
    """Latency metrics (seconds) in ms; rates and ratios as plain numbers."""
    if value is None:
        return "-"
    if row.metric.split(".")[0] in GATEABLE_LATENCY_METRICS:
        return f"{value * 1000:.2f} ms"
    return f"{value:.4g}"


def _percent(ratio: float) -> str:
    return f"{(ratio - 1.0) * 100:+.1f}%"


def to_markdown(result: GateResult, baseline: str, current: str) -> str:
    verdict = ("FAIL: performance regression" if result.failed
               else "UNDECIDED: within the machine's drift" if result.undecided else "PASS")
    advice = paired_advice(result)
    lines = [f"## servecap gate: {verdict}", "", *([advice, ""] if advice and not result.failed else []),
             (f"baseline `{baseline}` vs current `{current}`. A row fails only when the change is beyond its "
              "threshold and significant (95% bootstrap CI of current/baseline excludes 1; "
              "Mann-Whitney U p < 0.05 for p50/mean), also once each run is allowed the offset that the machine's "
              "drift inside the runs could give it (else undecided); a tail (p90 and above) of two runs is "
              "at most undecided, and does not set the exit code."), "",
             "| level | metric | baseline | current | change | 95% CI of change | p | threshold | verdict |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in result.rows:
        c = row.comparison
        if c is None:
            cells = ["-"] * 5
        else:
            ci = f"{_percent(c.ci95[0])} .. {_percent(c.ci95[1])}" if c.ci95 else "-"
            p = f"{c.p_value:.3g}" if c.p_value is not None else "-"
            cells = [_value(row, c.baseline), _value(row, c.current), _percent(c.ratio), ci, p]
        verdict_cell = f"**{row.verdict}**" if row.verdict in (REGRESSION, UNDECIDED, UNDECIDED_TAIL) else row.verdict
        lines.append(f"| {row.level} | {row.metric} | " + " | ".join(cells)
                     + f" | {row.threshold * 100:.0f}% | {verdict_cell} |")
    if result.notes:
        lines += ["", *[f"- {note}" for note in result.notes]]
    return "\n".join(lines) + "\n"


def to_json(result: GateResult, baseline: str, current: str) -> dict:
    rows = []
    for row in result.rows:
        c = row.comparison
        rows.append({
            "level": row.level, "metric": row.metric, "threshold": row.threshold,
            "higher_is_worse": row.higher_is_worse, "verdict": row.verdict, "basis": row.basis,
            "baseline": c.baseline if c else None, "current": c.current if c else None,
            "ratio": c.ratio if c else None, "ratio_ci95": list(c.ci95) if c and c.ci95 else None,
            "p_value": c.p_value if c else None, "regression": row.regression, "drift": row.drift,
        })
    return {"baseline": baseline, "current": current, "failed": result.failed,
            "regressions": sum(r["verdict"] == REGRESSION for r in rows),
            "undecided": sum(r["verdict"] == UNDECIDED for r in rows),
            "undecided_tails": sum(r["verdict"] == UNDECIDED_TAIL for r in rows), "advice": paired_advice(result),
            "rows": rows, "notes": result.notes}
