"""Leave-one-level-out: each level predicted by a calibration on its strategy's other levels.

summary.json's `validation` (the shape issue 13 fixes, plus the extras after it; typed as
contract.summary.ValidationSummary):

    {"method": "leave-one-level-out",
     "levels": {LEVEL: {"ttft_s.p50": {"predicted", "measured", "relative_error"}, ...}},
     "median_abs_error": {"ttft_s.p50": x, "ttft_s.p99": x, "tpot_s.p50": x, "tpot_s.p99": x,
                          "e2e_s.p50": x, "e2e_s.p99": x[, "ttfa_s.p50": x, "ttfa_s.p99": x]},
     "keys": [...],  the judged keys: those six, and the first answer token's where a level reasoned
                     (a reasoning model's answer waits for its reasoning tokens; elsewhere it is TTFT)
     "predictions": {LEVEL: {"ttft_s": {"p50": {"value", "interval": [lo, hi]}, "p95": ..., "p99": ...}, ...}},
                   the prediction itself: median over replications and their 95% spread
     "by_strategy": {STRATEGY: {"median_abs_error": {...}, "levels_in_median": [...],
                                "widest_gap": x | None, "sparse_grid": bool,
                                "max_output_tokens_per_s": x, "calibration": {...}}},
                   widest_gap: over the same levels, the widest load ratio between the two measured
                   levels a held-out one lay between (its neighbours: c=4 between c=2 and c=8 is 4.0);
                   None when none lay between two of its kind
                   sparse_grid: widest_gap is WIDE_GAP or more, so a held-out level was interpolated
                   across a span where the front end or the engine can saturate: the error there
                   measures the grid as much as the model, and the report does not state it as a finding
     "replications": R (at most; a level of n requests gets max(3, min(R, 8000 / n))), "unavailable": [...]}

relative_error = predicted / measured - 1. The medians are of |relative_error| over the levels
below the knee (`levels_below_knee`): output tokens/s at most MEDIAN_LOAD_FRACTION of their
strategy's highest, at a lower load than the level that reached it (past the knee a closed loop's
latency is the queue the load generator builds, not the server, and a level whose throughput fell
there, such as none at c=32, is further past it, not below it); the top-level median pools every
strategy's such levels. A strategy with fewer than MIN_LEVELS levels is not
validated (two calibration levels cannot pin down a load curve).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from reports.predict.calibration import Calibration, arrival_cv2, calibrate, predict, strategy_server
from reports.predict.evidence import KEYS, REASONING_KEYS, LevelSample
from contract.run_json import RunInfo
from contract.summary import HeldOut, PredictedQuantile, StrategyValidation, ValidationSummary

METHOD = "leave-one-level-out"
MEDIAN_LOAD_FRACTION = 0.8
MIN_LEVELS = 3
WIDE_GAP = 4.0                 # a held-out level between neighbours this far apart in load: too sparse to validate
REPLICATIONS = 8               # at most, per level; fewer for long levels (REQUEST_BUDGET)
MIN_REPLICATIONS = 3
REQUEST_BUDGET = 8000          # simulated requests per held-out level (about): a long level's own count already
                               # pins its percentiles, and the report stays quick
LONG_LEVEL_REQUESTS = REQUEST_BUDGET // MIN_REPLICATIONS   # a longer level is simulated for this many a run


def levels_below_knee(group: list[LevelSample]) -> list[str]:
    """The levels of one strategy that its medians are taken over: output tokens/s at most
    MEDIAN_LOAD_FRACTION of the strategy's highest, at a lower load than the level with the highest
    (a level of another kind, concurrency beside rates, is judged by its throughput alone)."""
    if not group:
        return []
    peak = max(group, key=lambda s: s.output_tokens_per_s or 0.0)
    top = peak.output_tokens_per_s or 0.0
    return [s.level for s in group if (s.output_tokens_per_s or 0.0) <= MEDIAN_LOAD_FRACTION * top
            and not (s.kind == peak.kind and s.load > peak.load)]


def widest_gap(group: list[LevelSample], names: list[str]) -> float | None:
    """The widest load ratio next / previous over the named levels that lie between two levels of their
    kind in `group` (ordered by load): the span a held-out level is interpolated across."""
    gaps = []
    for kind in {s.kind for s in group}:
        loads = [s.load for s in group if s.kind == kind]
        levels = [s.level for s in group if s.kind == kind]
        gaps += [loads[i + 1] / loads[i - 1] for i in range(1, len(levels) - 1) if levels[i] in names]
    return max(gaps) if gaps else None


def replications_for(requests: int, most: int) -> int:
    """Runs to simulate for a level that measured `requests` (each run as long as the measurement, or
    `requests_per_run`'s count)."""
    return max(min(MIN_REPLICATIONS, most), min(most, -(-REQUEST_BUDGET // max(requests, 1))))


def requests_per_run(requests: int) -> int | None:
    """None: simulate the level's measured window; a count: a level too long for the budget even at
    MIN_REPLICATIONS runs is simulated for that many requests a run instead (steady state, its edges
    left out: reports.predict.calibration.predict). Without it the 1,000,000-record speed benchmark's report
    simulated 3 x 83,000 requests a held-out level: 89 s against the 15 s target, 77 s of it here."""
    return LONG_LEVEL_REQUESTS if requests > LONG_LEVEL_REQUESTS else None


def _pair(predicted: float | None, measured: float | None) -> HeldOut:
    rel = predicted / measured - 1.0 if predicted is not None and measured else None
    return HeldOut(predicted=predicted, measured=measured, relative_error=rel)


def predicted_quantiles(metrics: dict) -> dict[str, dict[str, PredictedQuantile]]:
    """A Replicated's metrics ({metric: {q: {"value", "interval"}}}) as summary.json's typed predictions."""
    return {metric: {q: PredictedQuantile(value=entry["value"],
                                          interval=tuple(entry["interval"]) if entry["interval"] is not None else None)
                     for q, entry in by_q.items()}
            for metric, by_q in metrics.items()}


def judged_keys(samples: dict[str, list[LevelSample]]) -> tuple[str, ...]:
    """KEYS, and the first answer token's where any level's requests reasoned."""
    return KEYS + REASONING_KEYS if any(s.reasons for group in samples.values() for s in group) else KEYS


def keys_of(summary: ValidationSummary | None) -> tuple[str, ...]:
    """The keys a `validation` summary judged (its `keys`; one written before them: KEYS)."""
    return tuple((summary.keys if summary is not None else None) or KEYS)


def _median_abs(levels: dict[str, dict[str, HeldOut]], names: list[str], keys: tuple[str, ...]) -> dict:
    out = {}
    for key in keys:
        errors = [abs(levels[name][key].relative_error) for name in names
                  if levels[name][key].relative_error is not None]
        out[key] = float(np.median(errors)) if errors else None
    return out


@dataclass(frozen=True)
class Validation:
    """What `validate` found.

    Attributes:
        summary: summary.json's `validation` (the shape above, typed: contract.summary.ValidationSummary).
        calibrations: each strategy's calibration on all its levels, where one could be fitted (a
            strategy too short to validate included): fitted once here, and used again by the report's
            per-level predictions (`reports.predict.per_level.add_predictions`).
    """

    summary: ValidationSummary
    calibrations: dict[str, Calibration]


def validate(run: RunInfo, samples: dict[str, list[LevelSample]], *, replications: int = REPLICATIONS,
             progress: Callable[[str], None] | None = None) -> Validation:
    """Each strategy's leave-one-level-out predictions from its level samples (``reports.predict.evidence``),
    and its calibration on all of them."""
    levels, predictions, by_strategy, unavailable = {}, {}, {}, []
    calibrations: dict[str, Calibration] = {}
    eligible_all: list[str] = []
    cv2 = arrival_cv2(run)
    keys = judged_keys(samples)
    for strategy, group in samples.items():
        try:
            server = strategy_server(run, strategy)
        except ValueError as exc:
            server, no_server = None, f"{strategy}: {exc}"
        else:
            try:
                calibrations[strategy] = calibrate(group, server, cv2)
            except ValueError:
                pass   # its held-out levels say why, where it has enough to hold one out
        if len(group) < MIN_LEVELS:
            unavailable.append(f"{strategy}: {len(group)} level(s); leave-one-out needs at least {MIN_LEVELS}")
            continue
        if server is None:
            unavailable.append(no_server)
            continue
        done = []
        for held in group:
            if progress:
                progress(held.level)
            try:
                calibration = calibrate([s for s in group if s is not held], server, cv2)
                predicted = predict(calibration, held.kind, held.load, held.warmup_s, held.duration_s,
                                    replications=replications_for(held.requests, replications),
                                    requests=requests_per_run(held.requests))
            except (ValueError, RuntimeError) as exc:
                unavailable.append(f"{held.level}: {exc}")
                continue
            levels[held.level] = {f"{m}.{q}": _pair(predicted.value(m, q), held.measured[m][q])
                                  for m, q in (key.split(".") for key in keys)}
            predictions[held.level] = predicted_quantiles(predicted.metrics)
            done.append(held)
        if not done:
            continue
        top = max(s.output_tokens_per_s or 0.0 for s in group)
        below = set(levels_below_knee(group))
        eligible = [s.level for s in done if s.level in below]
        eligible_all += eligible
        full = calibrations.get(strategy)
        gap = widest_gap(group, eligible)
        by_strategy[strategy] = StrategyValidation(
            median_abs_error=_median_abs(levels, eligible, keys), levels_in_median=tuple(eligible),
            widest_gap=gap, sparse_grid=gap is not None and gap >= WIDE_GAP, max_output_tokens_per_s=top,
            calibration=full.describe() if full is not None else None)
    summary = ValidationSummary(method=METHOD, levels=levels, median_abs_error=_median_abs(levels, eligible_all, keys),
                                keys=tuple(keys), predictions=predictions, by_strategy=by_strategy,
                                replications=replications, unavailable=tuple(unavailable))
    return Validation(summary, calibrations)
