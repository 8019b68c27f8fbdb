"""The regression gate: compare two runs metric by metric and decide pass or regression.

A row fails only when the observed change is beyond its threshold AND the change is
significant (see reports.gate.stats): noisy CI hosts then neither cry wolf (an A/A
difference inside the noise is not significant) nor sleep (a real 20% slowdown is
both beyond a 10% threshold and far outside the noise).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reports.gate.inputs import GateSide
from reports.gate.stats import (
    Comparison, between_run_log_sd, compare_blocked, compare_distributions, compare_within_run_ratios,
    widen_for_run_noise,
)
from reports.gate.thresholds import LATENCY_METRICS, RatioCheck, Threshold

PASS, REGRESSION, NOISE, IMPROVED, NO_DATA = "pass", "REGRESSION", "beyond threshold, not significant", "improved", "no data"


@dataclass(frozen=True)
class GateRow:
    """One metric at one level (or one within-run ratio), with its verdict."""

    level: str
    metric: str
    threshold: float
    higher_is_worse: bool
    comparison: Comparison | None
    verdict: str
    basis: str  # "raw records", "summary CIs" or "summary values"

    @property
    def regression(self) -> float | None:
        """How much worse, as a fraction (negative = better)."""
        if self.comparison is None:
            return None
        change = self.comparison.ratio - 1.0
        return change if self.higher_is_worse else -change


@dataclass
class GateResult:
    rows: list[GateRow]
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(row.verdict == REGRESSION for row in self.rows)


def _verdict(comparison: Comparison | None, threshold: float, higher_is_worse: bool) -> str:
    if comparison is None:
        return NO_DATA
    change = comparison.ratio - 1.0
    worse_by = change if higher_is_worse else -change
    if worse_by > threshold:
        return REGRESSION if comparison.significant(higher_is_worse) else NOISE
    if worse_by < -threshold and comparison.significant(not higher_is_worse):
        return IMPROVED
    return PASS


def _summary_value(level: dict, threshold: Threshold):
    if threshold.stat is None:
        return level.get(threshold.metric), None
    metric = (level.get("metrics") or {}).get(threshold.metric) or {}
    return metric.get(threshold.stat), metric.get(f"{threshold.stat}_ci95")


def _from_summaries(base_level: dict, cur_level: dict, threshold: Threshold) -> tuple[Comparison | None, str]:
    """Without raw records: non-overlapping per-run CIs stand in for a test; no CIs, the point change decides."""
    (b, b_ci), (c, c_ci) = _summary_value(base_level, threshold), _summary_value(cur_level, threshold)
    if b is None or c is None or not b:
        return None, "summary values"
    if b_ci and c_ci:
        # the ratio's interval, from the two runs' own intervals (worst cases)
        ci = (c_ci[0] / b_ci[1], c_ci[1] / b_ci[0]) if b_ci[0] > 0 and b_ci[1] > 0 else None
        return Comparison(b, c, c / b, ci, None, 0, 0), "summary CIs"
    point = c / b
    return Comparison(b, c, point, (point, point), None, 0, 0), "summary values"


def compare_threshold(baseline: GateSide, current: GateSide, level: str, threshold: Threshold,
                      seed: int, replicates: list[GateSide] = ()) -> GateRow:
    higher_is_worse = threshold.higher_is_worse
    if baseline.data is not None and current.data is not None:
        comparison = None
        if threshold.metric in LATENCY_METRICS:
            b = baseline.latency_values(level, threshold.metric)
            c = current.latency_values(level, threshold.metric)
            if b is not None and c is not None and len(b[0]) and len(c[0]):
                comparison = compare_blocked(b[0], b[1], c[0], c[1], threshold.stat, higher_is_worse, seed)
        else:  # per-window rates are already block-level values
            b = baseline.window_rates(level, threshold.metric)
            c = current.window_rates(level, threshold.metric)
            if b is not None and c is not None and len(b) and len(c):
                comparison = compare_distributions(b, c, "mean", higher_is_worse, seed)
        basis = "raw records"
    else:
        comparison, basis = _from_summaries(baseline.levels[level], current.levels[level], threshold)
    if comparison is not None and len(replicates) >= 2:
        log_sd = between_run_log_sd([_summary_value(r.levels[level], threshold)[0]
                                     for r in replicates if level in r.levels])
        if log_sd is not None:
            comparison = widen_for_run_noise(comparison, log_sd, higher_is_worse)
            basis += f" + run-to-run noise of {len(replicates)} baselines ({log_sd:.1%})"
    verdict = _verdict(comparison, threshold.limit, higher_is_worse)
    return GateRow(level, threshold.key, threshold.limit, higher_is_worse, comparison, verdict, basis)


def compare_ratio(baseline: GateSide, current: GateSide, check: RatioCheck, seed: int) -> GateRow:
    level = f"{check.numerator} / {check.denominator}"
    sides = [side.window_rates(lvl, check.metric) for side in (baseline, current)
             for lvl in (check.numerator, check.denominator)]
    if all(s is not None and len(s) for s in sides):
        comparison, basis = compare_within_run_ratios(*sides, seed=seed), "raw records"
    else:
        values = [side.levels.get(lvl, {}).get(check.metric) for side in (baseline, current)
                  for lvl in (check.numerator, check.denominator)]
        if any(not v for v in values):
            comparison = None
        else:
            b, c = values[0] / values[1], values[2] / values[3]
            comparison = Comparison(b, c, c / b, (c / b, c / b), None, 0, 0)
        basis = "summary values"
    verdict = _verdict(comparison, check.limit, higher_is_worse=False)
    return GateRow(level, check.key, check.limit, False, comparison, verdict, basis)


def run_gate(baseline: GateSide, current: GateSide, thresholds: list[Threshold],
             ratios: list[RatioCheck], replicates: list[GateSide] = ()) -> GateResult:
    """Every threshold at every level both runs share (or at its own level), plus each ratio check.

    `replicates`: all baseline runs (the first is `baseline`); with two or more, each interval is
    widened by the run-to-run noise they show (see gate_stats.widen_for_run_noise)."""
    shared = [level for level in baseline.levels if level in current.levels]
    notes = []
    only_base = sorted(set(baseline.levels) - set(current.levels))
    only_cur = sorted(set(current.levels) - set(baseline.levels))
    if only_base:
        notes.append(f"levels only in the baseline (not compared): {', '.join(only_base)}")
    if only_cur:
        notes.append(f"levels only in the current run (not compared): {', '.join(only_cur)}")
    if baseline.data is None or current.data is None:
        notes.append("raw records missing on one side: judged from summary values (less sensitive to noise)")
    rows = []
    seed = 0
    for threshold in thresholds:
        levels = shared if threshold.level is None else [threshold.level]
        for level in levels:
            if level not in baseline.levels or level not in current.levels:
                notes.append(f"threshold {threshold.level}@{threshold.key}: level {level} is not in both runs")
                continue
            rows.append(compare_threshold(baseline, current, level, threshold, seed, replicates))
            seed += 1
    for check in ratios:
        rows.append(compare_ratio(baseline, current, check, seed))
        seed += 1
    rows.sort(key=lambda row: (shared.index(row.level) if row.level in shared else len(shared), row.metric))
    return GateResult(rows, notes)
