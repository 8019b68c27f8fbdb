"""A compare run's verdict as Markdown (stdout, compare.md, $GITHUB_STEP_SUMMARY) and as JSON."""

from __future__ import annotations

from reports.paired.decision import CompareVerdict
from reports.paired.stats import PairedResult, WORSE


def _percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{(ratio - 1.0) * 100:+.1f}%"


def _ci(result: PairedResult) -> str:
    return "-" if result.ci is None else f"{_percent(result.ci[0])} .. {_percent(result.ci[1])}"


SCHEDULE_WORDS = {
    "interleaved": "Load alternated between the arms in slices (AB or BA per pair, same requests within a pair)",
    "duet": ("Both arms were loaded at the same time, pair by pair (a duet: same requests, same cores, so drift hit "
             "both at once; each arm's absolute figures include the other's load, the ratios are the measurement)"),
}


def to_markdown(verdict: CompareVerdict, a_label: str, b_label: str, notes: list[str] = (), *,
                schedule: str | None = None) -> str:
    lines = [f"## servecap compare: {verdict.summary}", "",
             f"A = `{a_label}`, B = `{b_label}`. {SCHEDULE_WORDS[schedule or 'interleaved']}; each row compares "
             "the arms pair by pair. "
             "change = B vs A (Hodges-Lehmann estimate over the per-pair ratios), interval = its "
             "(1 - 2 alpha) distribution-free interval, p = Wilcoxon signed-rank, all at the look that decided "
             "the metric (its pairs and alpha; each look tests at its group-sequential boundary, so that all looks together keep the run's alpha). "
             "SAME: the interval lies within the threshold; WORSE/BETTER: significant and beyond it.", "",
             "| metric | gated | pairs | change | interval | p | alpha | per-pair SD (robust) | threshold | verdict |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in verdict.results:
        p = "-" if r.p_value is None else f"{r.p_value:.3g}"
        sd = "-" if r.log_sd is None else f"{r.log_sd * 100:.1f}% ({r.log_sd_robust * 100:.1f}%)"
        cell = f"**{r.verdict}**" if r.verdict == WORSE and r.metric in verdict.gated else r.verdict
        lines.append(f"| {r.metric} | {'yes' if r.metric in verdict.gated else 'no'} | {r.pairs} | "
                     f"{_percent(r.ratio)} | {_ci(r)} | {p} | {r.alpha:.2g} | {sd} | {r.threshold * 100:.0f}% | {cell} |")
    if verdict.arm_p99:
        lines += ["", "Whole-arm p99 (every measured request of each arm; interval from a paired bootstrap "
                  "over pairs):", "", "| metric | A | B | change | 95% interval |", "| --- | --- | --- | --- | --- |"]
        for q in verdict.arm_p99:
            lines.append(f"| {q.metric} | {q.a * 1000:.2f} ms | {q.b * 1000:.2f} ms | {_percent(q.ratio)} | "
                         f"{_percent(q.ci[0])} .. {_percent(q.ci[1])} |")
    if notes:
        lines += ["", *[f"- {note}" for note in notes]]
    return "\n".join(lines) + "\n"


def to_json(verdict: CompareVerdict, a_label: str, b_label: str, extra: dict | None = None) -> dict:
    rows = [{"metric": r.metric, "gated": r.metric in verdict.gated, "pairs": r.pairs, "ratio": r.ratio,
             "interval": list(r.ci) if r.ci else None, "p_value": r.p_value, "alpha": r.alpha, "log_sd": r.log_sd,
             "log_sd_robust": r.log_sd_robust,
             "threshold": r.threshold, "higher_is_worse": r.higher_is_worse, "verdict": r.verdict}
            for r in verdict.results]
    arm = [{"metric": q.metric, "a": q.a, "b": q.b, "ratio": q.ratio, "interval95": list(q.ci)}
           for q in verdict.arm_p99]
    return {"a": a_label, "b": b_label, "summary": verdict.summary, "exit_code": verdict.exit_code,
            "alpha": verdict.alpha, "gated": list(verdict.gated), "worse": verdict.worse,
            "undecided": verdict.undecided, "metrics": rows, "arm_p99": arm, **(extra or {})}
