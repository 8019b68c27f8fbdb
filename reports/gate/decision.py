"""The regression gate: compare two runs metric by metric and decide pass, regression or undecided.

A row fails only when the observed change is beyond its threshold AND the change is
significant (see reports.gate.stats): noisy CI hosts then neither cry wolf (an A/A
difference inside the noise is not significant) nor sleep (a real 20% slowdown is
both beyond a 10% threshold and far outside the noise).

Two runs ran at different times, so each sits wherever the machine's speed was then. What the
machine's speed did inside the runs (stats.block_drift_log_sd: the wander of their time blocks'
medians and the shift between their halves, net of a median's sampling noise) says how far that
can put them apart: each run is allowed an offset of that SD, so the interval is widened by the SD
of a difference of two such offsets (stats.widen_for_run_noise). A burst of contention that slows a
block or two is not such an offset: it moves a level's median little, and the block bootstrap
already carries it as the run's own noise; counted again as an offset of the whole run, it would
hide any regression smaller than the burst. A change that is significant within the runs but not
once drift is allowed for is UNDECIDED: two separate runs cannot tell it from drift, and only a
paired `servecap compare` (both builds under load in alternating slices) can.

A tail (p90 and above) of a run is set by its slowest moments: whatever else the machine ran
then, a burst in one block or light interference that touches one token in a hundred throughout.
One run cannot show how often that comes, and a tail moves with it far past any threshold, so
without replicate baselines a tail row beyond its threshold and significant within the runs is
UNDECIDED_TAIL, never REGRESSION. Nor does it make the gate undecided (exit 3): no pair of runs can
decide it, so it would make exit 3 the answer to nearly every pair; the table and a note show it,
and exit 3 stays for the rows two runs can decide when drift hides their change. The medians, which
such moments barely move, carry the two-run gate's power. Replicate baselines measure the
run-to-run spread of the tail itself, and with them a tail row is judged like any other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contract.level_result import LevelResult
from reports.gate.inputs import GateSide, summary_value
from reports.gate.stats import (
    Comparison, between_run_log_sd, block_drift_log_sd, compare_blocked, compare_distributions,
    compare_within_run_ratios, is_tail, widen_for_run_noise,
)
from reports.gate.thresholds import GATEABLE_LATENCY_METRICS, RatioCheck, Threshold

PASS, REGRESSION, NOISE, IMPROVED, NO_DATA = "pass", "REGRESSION", "beyond threshold, not significant", "improved", "no data"
UNDECIDED = "undecided: within drift"
UNDECIDED_TAIL = "undecided: a tail of two runs"
# the metrics whose per-request values show how far a row's statistic drifts; the row is allowed the
# largest of their drifts. A request's gaps are not independent values (its TPOT is their mean). A
# request's E2E is its TTFT and its decode, and in a closed loop the next request waits for it, so E2E
# and throughput move with whichever part of the request drifts, and with the loop's own modes (users
# sending in waves or staggered), which show first in TTFT and move E2E by more than TTFT's share of it.
WHOLE_REQUEST = ("ttft_s", "tpot_s", "e2e_s")
DRIFT_METRIC = {"ttft_s": ("ttft_s",), "tpot_s": ("tpot_s",), "itl_s": ("tpot_s",), "e2e_s": WHOLE_REQUEST,
                "ttfa_s": ("ttft_s", "tpot_s", "ttfa_s"), "output_tokens_per_s": WHOLE_REQUEST,
                "request_rate_rps": WHOLE_REQUEST}


@dataclass(frozen=True)
class GateRow:
    """One metric at one level (or one within-run ratio), with its verdict."""

    level: str
    metric: str
    threshold: float
    higher_is_worse: bool
    comparison: Comparison | None
    verdict: str
    basis: str  # "raw records", "summary CIs" or "summary values", and what widened the interval
    drift: float | None = None  # SD of log speed between the runs' time blocks (None: not measured)

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

    @property
    def undecided(self) -> list[GateRow]:
        """Rows beyond their threshold and significant within the runs, but not beyond their drift (exit 3)."""
        return [row for row in self.rows if row.verdict == UNDECIDED]

    @property
    def undecided_tails(self) -> list[GateRow]:
        """Tails of two runs beyond their threshold and significant within the runs (no exit code of their own)."""
        return [row for row in self.rows if row.verdict == UNDECIDED_TAIL]


def _verdict(comparison: Comparison | None, threshold: float, higher_is_worse: bool,
             before_drift: Comparison | None = None) -> str:
    """`comparison` decides; `before_drift` (the same change without the drift allowance) tells an
    UNDECIDED row (significant until drift is allowed for) from NOISE."""
    if comparison is None:
        return NO_DATA
    change = comparison.ratio - 1.0
    worse_by = change if higher_is_worse else -change
    if worse_by > threshold:
        if comparison.significant(higher_is_worse):
            return REGRESSION
        hidden_by_drift = before_drift is not None and before_drift.significant(higher_is_worse)
        return UNDECIDED if hidden_by_drift else NOISE
    if worse_by < -threshold and comparison.significant(not higher_is_worse):
        return IMPROVED
    return PASS


def _summary_value(level: LevelResult, threshold: Threshold):
    return summary_value(level, threshold.metric, threshold.stat)


def _from_summaries(base_level: LevelResult, cur_level: LevelResult,
                    threshold: Threshold) -> tuple[Comparison | None, str]:
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


def level_drifts(baseline: GateSide, current: GateSide, levels: list[str]) -> dict[tuple[str, str], float]:
    """(level, drift metric) -> the drift to allow for: the level's own (stats.block_drift_log_sd over
    both runs' time blocks), never less than that of every level both runs share pooled (one machine
    ran them all, and a level's own twenty blocks and two halves are few). Empty without raw records."""
    if baseline.data is None or current.data is None:
        return {}
    drifts = {}
    for metric in dict.fromkeys(metric for metrics in DRIFT_METRIC.values() for metric in metrics):
        own = {}
        for level in levels:
            sides = [side.latency_values(level, metric) for side in (baseline, current)]
            if all(s is not None and len(s[0]) for s in sides) and (d := block_drift_log_sd(*sides)) is not None:
                own[level] = (d, sides)
        if not own:
            continue
        pooled = block_drift_log_sd(*[side for _, sides in own.values() for side in sides])
        for level, (d, _) in own.items():
            drifts[level, metric] = max(d, pooled or 0.0)
    return drifts


def compare_threshold(baseline: GateSide, current: GateSide, level: str, threshold: Threshold,
                      seed: int, replicates: list[GateSide] = (), drift: float | None = None) -> GateRow:
    """`drift`: the SD of log speed the runs' own time blocks show (level_drifts); None: not allowed for."""
    higher_is_worse = threshold.higher_is_worse
    if baseline.data is not None and current.data is not None:
        comparison = None
        if threshold.metric in GATEABLE_LATENCY_METRICS:
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
    log_sd = None
    if comparison is not None and len(replicates) >= 2:
        log_sd = between_run_log_sd([_summary_value(r.levels[level], threshold)[0]
                                     for r in replicates if level in r.levels])
    before_drift = comparison
    if comparison is not None and log_sd is not None:
        before_drift = widen_for_run_noise(comparison, log_sd, higher_is_worse)
        basis += f" + run-to-run noise of {len(replicates)} baselines ({log_sd:.1%})"
    if comparison is not None and drift and drift > (log_sd or 0.0):  # the larger offset of the two decides
        comparison = widen_for_run_noise(comparison, drift, higher_is_worse)
        basis += f" + drift within the runs ({drift:.1%})"
    else:
        comparison, before_drift = before_drift, None
    verdict = _verdict(comparison, threshold.limit, higher_is_worse, before_drift)
    if verdict in (REGRESSION, UNDECIDED) and threshold.stat and is_tail(threshold.stat) and log_sd is None:
        verdict = UNDECIDED_TAIL   # see the module docstring
    return GateRow(level, threshold.key, threshold.limit, higher_is_worse, comparison, verdict, basis, drift)


def compare_ratio(baseline: GateSide, current: GateSide, check: RatioCheck, seed: int) -> GateRow:
    level = f"{check.numerator} / {check.denominator}"
    sides = [side.window_rates(lvl, check.metric) for side in (baseline, current)
             for lvl in (check.numerator, check.denominator)]
    if all(s is not None and len(s) for s in sides):
        comparison, basis = compare_within_run_ratios(*sides, seed=seed), "raw records"
    else:
        values = [summary_value(side.levels.get(lvl), check.metric)[0] for side in (baseline, current)
                  for lvl in (check.numerator, check.denominator)]
        if any(not v for v in values):
            comparison = None
        else:
            b, c = values[0] / values[1], values[2] / values[3]
            comparison = Comparison(b, c, c / b, (c / b, c / b), None, 0, 0)
        basis = "summary values"
    verdict = _verdict(comparison, check.limit, higher_is_worse=False)
    return GateRow(level, check.key, check.limit, False, comparison, verdict, basis)


def _load_flag(level: str) -> str:
    """A sweep's level id ("continuous/c=4", "continuous/rps=12.0") as `servecap compare`'s load flag."""
    load = level.rpartition("/")[2]
    if load.startswith("rps="):
        return f"--rate {load[4:]}"
    return f"--concurrency {load[2:] if load.startswith('c=') else 'N'}"


def paired_advice(result: GateResult) -> str | None:
    """One line for an undecided result: what was within drift, and the paired command to run instead."""
    rows = result.undecided
    if not rows:
        return None
    worst = max(rows, key=lambda row: row.regression)
    more = f", and {len(rows) - 1} more row{'s' if len(rows) > 2 else ''}" if len(rows) > 1 else ""
    levels = list(dict.fromkeys([worst.level, *(row.level for row in rows)]))
    per_level = f" (one per level: {', '.join(levels)})" if len(levels) > 1 else ""
    return ("undecided: two separate runs cannot separate this from drift "
            f"({worst.metric} at {worst.level} {worst.comparison.ratio - 1:+.1%}{more}, within what the runs' own "
            f"speed drift of {worst.drift:.1%} can move); "
            f"run `servecap compare --out runs/cmp {_load_flag(levels[0])} "
            '--a-cmd "BASELINE_SERVER --port {port}" --b-cmd "CURRENT_SERVER --port {port}"` '
            f"(paired){per_level} instead, then `servecap gate runs/cmp`")


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
    drifts = level_drifts(baseline, current, shared)
    for threshold in thresholds:
        levels = shared if threshold.level is None else [threshold.level]
        for level in levels:
            if level not in baseline.levels or level not in current.levels:
                notes.append(f"threshold {threshold.level}@{threshold.key}: level {level} is not in both runs")
                continue
            drift = max((drifts[level, metric] for metric in DRIFT_METRIC[threshold.metric]
                         if (level, metric) in drifts), default=None)
            rows.append(compare_threshold(baseline, current, level, threshold, seed, replicates, drift))
            seed += 1
    for check in ratios:
        rows.append(compare_ratio(baseline, current, check, seed))
        seed += 1
    rows.sort(key=lambda row: (shared.index(row.level) if row.level in shared else len(shared), row.metric))
    result = GateResult(rows, notes)
    if tails := result.undecided_tails:
        notes.append(f"{len(tails)} tail row(s) (p90 and above) moved beyond the threshold, significantly within "
                     "the runs; two runs cannot judge a tail (it is set by their slowest moments), so these do not "
                     "set the exit code: repeat --baseline with replicate runs, or run `servecap compare`, to judge them")
    return result
