"""The verdict: max sustainable load per SLO at p99 (with confidence), the knee, the operating point.

Whether a level meets the SLO is the contract's one judge (contract.slo.judge) over the level's
measure-phase requests (`samples`: reports.summary.slo_samples), the same `servecap sweep --auto`
steers by; the confidence grading is the report's own. Pure: typed summary levels in
(contract.level_result.LevelResult), the typed `Verdict` out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from calculators.cost import slo_operating_point
from contract.level_result import LevelResult
from contract.slo import SLO, Judgement, SloSample, judge
from contract.summary import Interpolated, Knee, OperatingPoint, SustainableRow, Verdict

MIN_COUNT_FOR_P99 = 100  # below 100 values a p99 is just the sample maximum: never `high` confidence
KNEE_METRIC = "e2e_s"


def by_strategy(levels: Sequence[LevelResult]) -> dict[str, list[LevelResult]]:
    """{strategy: levels with a parsed offered load, sorted by it} (strategy None -> "-")."""
    out: dict[str, list[LevelResult]] = {}
    for level in levels:
        if level.offered:
            out.setdefault(level.strategy or "-", []).append(level)
    for group in out.values():
        group.sort(key=lambda lvl: lvl.offered.value)
    return out


def _check(level: LevelResult, slo: SLO, sample: SloSample) -> tuple[Judgement, bool]:
    """(the judge's verdict on the level's requests, whether it also meets it with the whole p99 95% CI
    of its table under the limit)."""
    judged = judge(slo, sample)
    if not judged.meets:
        return judged, False
    confident = True
    for metric, limit in slo.limits_s().items():
        stats = level.metrics[metric]
        ci = stats.p99_ci95
        confident &= ci is not None and ci[1] <= limit and stats.count >= MIN_COUNT_FOR_P99
    return judged, confident


def max_sustainable(levels: Sequence[LevelResult], slo: SLO, samples: Mapping[str, SloSample]) -> list[SustainableRow]:
    """Per strategy and per SLO (plus `all`): the highest level, walking up the offered load,
    before the first level that does not meet it. `samples`: {level id: its measure-phase requests}.

    `confidence` is `high` when the p99's 95% CI upper bound is also under the
    limit and the p99 rests on at least MIN_COUNT_FOR_P99 values, `low` when only
    the point estimate is; `confident_level` is the highest level (before the
    first failure) that is `high`.
    """
    limits = slo.limits_s()
    if not limits:
        return []
    checks = {metric: slo.only(metric) for metric in limits}
    if len(limits) > 1:
        checks["all"] = slo
    out = []
    for strategy, group in by_strategy(levels).items():
        for name, check_slo in checks.items():
            check_limits = check_slo.limits_s()
            best, confident_level, failing = None, None, None
            judged = {}
            for level in group:
                judged[level.level], confident = _check(level, check_slo, samples[level.level])
                if not judged[level.level].meets:
                    failing = level
                    break
                best = level
                confident_level = level if confident else confident_level
            tail = best.metrics[name] if best and name != "all" else None
            out.append(SustainableRow(
                strategy=strategy, slo=name,
                limit_s=check_limits.get(name) if name != "all" else None,
                level=best.level if best else None,
                offered=best.offered if best else None,
                request_rate_rps=best.request_rate_rps if best else None,
                output_tokens_per_s=best.output_tokens_per_s if best else None,
                p99_s=tail.p99 if tail else None,
                p99_ci95=tail.p99_ci95 if tail else None,
                confidence=None if best is None else ("high" if best is confident_level else "low"),
                confident_level=confident_level.level if confident_level else None,
                first_failing_level=failing.level if failing else None,
                failing_reason=judged[failing.level].reason if failing else None,
                interpolated=_interpolated(best, failing, judged, name, check_limits),
            ))
    return out


def _interpolated(best: LevelResult | None, failing: LevelResult | None, judged: dict[str, Judgement], metric: str,
                  limits: dict[str, float]) -> Interpolated | None:
    """Where p99 crosses the limit between the last passing and the first failing level, by linear
    interpolation of load and throughput (calculators.cost.slo_operating_point) over the p99s the
    judge read; None when the failure is not that metric's finite p99 (errors, unfinished requests,
    no values, `all`) or there is no bracketing pair."""
    if metric == "all" or best is None or failing is None or not failing.output_tokens_per_s:
        return None
    broke = judged[failing.level]
    if broke.broken_by != metric or broke.p99_s[metric] is None or not math.isfinite(broke.p99_s[metric]):
        return None
    pair = (best, failing)
    point = slo_operating_point([lvl.offered.value for lvl in pair], [lvl.output_tokens_per_s for lvl in pair],
                                [judged[lvl.level].p99_s[metric] for lvl in pair], limits[metric])
    if point is None or not point.interpolated:
        return None
    return Interpolated(offered_load=point.load, output_tokens_per_s=point.throughput)


def knee(group: list[LevelResult], metric: str = KNEE_METRIC) -> Knee | None:
    """Kneedle (Satopaa et al., 2011) on the throughput-latency curve of one strategy.

    x = output tokens/s, y = p99 latency, both min-max normalized over the
    levels in offered-load order; the knee is the level maximizing x_n - y_n
    (the most throughput before latency climbs). None below 3 levels.
    """
    points = [(lvl, lvl.output_tokens_per_s, lvl.metrics[metric].p99) for lvl in group
              if lvl.output_tokens_per_s is not None and lvl.metrics[metric].p99 is not None]
    if len(points) < 3:
        return None
    x = np.array([p[1] for p in points])
    y = np.array([p[2] for p in points])
    span_x, span_y = np.ptp(x), np.ptp(y)
    if span_x == 0 or span_y == 0:
        return None
    score = (x - x.min()) / span_x - (y - y.min()) / span_y
    level = points[int(np.argmax(score))][0]
    return Knee(level=level.level, offered=level.offered, metric=metric,
                output_tokens_per_s=level.output_tokens_per_s, request_rate_rps=level.request_rate_rps,
                p99_s=level.metrics[metric].p99)


def operating_point(levels: Sequence[LevelResult], sustainable: list[SustainableRow],
                    knees: dict[str, Knee | None]) -> OperatingPoint | None:
    """The level to price: the highest-throughput max-sustainable level under every SLO;
    without SLOs the highest-throughput knee; without knees the highest-throughput level."""
    by_id = {lvl.level: lvl for lvl in levels}
    wanted = answer_slo(sustainable)
    candidates = [(row.level, f"max sustainable load under SLO ({wanted})")
                  for row in sustainable if row.slo == wanted and row.level]
    if not candidates and not sustainable:
        candidates = [(k.level, "knee of the throughput-latency curve") for k in knees.values() if k]
    if not candidates and not sustainable:
        candidates = [(lvl.level, "highest measured throughput") for lvl in levels]
    candidates = [(lvl, basis) for lvl, basis in candidates if by_id[lvl].output_tokens_per_s]
    if not candidates:
        return None
    level_id, basis = max(candidates, key=lambda c: by_id[c[0]].output_tokens_per_s)
    return _point(by_id[level_id], basis)


def _point(level: LevelResult, basis: str) -> OperatingPoint:
    """A level as a point to price: its throughputs and why it was chosen."""
    return OperatingPoint(level=level.level, strategy=level.strategy, offered=level.offered, basis=basis,
                          output_tokens_per_s=level.output_tokens_per_s, request_rate_rps=level.request_rate_rps,
                          total_tokens_per_s=level.output_tokens_per_s + (level.prompt_tokens_per_s or 0.0))


def answer_slo(sustainable: Sequence[SustainableRow]) -> str | None:
    """The SLO row the answer quotes: `all` when several limits are set, else the one set."""
    names = [row.slo for row in sustainable]
    return "all" if "all" in names else next(iter(names), None)


def cost_by_strategy(levels: Sequence[LevelResult], sustainable: list[SustainableRow],
                     cost: Callable[[OperatingPoint], dict]) -> dict[str, dict]:
    """Each strategy's max sustainable level under the answer's SLO, priced; strategies whose
    every level fails are left out (nothing to price)."""
    by_id = {lvl.level: lvl for lvl in levels}
    wanted = answer_slo(sustainable)
    out = {}
    for row in sustainable:
        if row.slo == wanted and row.level and by_id[row.level].output_tokens_per_s:
            out[row.strategy] = cost(_point(by_id[row.level], f"max sustainable load under SLO ({wanted})"))
    return out


def build_verdict(levels: Sequence[LevelResult], slo: SLO, cost: Callable[[OperatingPoint], dict],
                  samples: Mapping[str, SloSample]) -> Verdict:
    """summary.json's `verdict`; `cost(operating_point) -> dict` prices the operating point; `samples`:
    {level id: its measure-phase requests} (reports.summary.slo_samples)."""
    sustainable = max_sustainable(levels, slo, samples)
    knees = {strategy: knee(group) for strategy, group in by_strategy(levels).items()}
    point = operating_point(levels, sustainable, knees)
    return Verdict(
        slo=slo,
        max_sustainable=tuple(sustainable),
        knee=knees,
        operating_point=point,
        cost=cost(point) if point else {"unavailable": "no level meets the SLOs" if sustainable
                                         else "no level with a measured throughput"},
        cost_by_strategy=cost_by_strategy(levels, sustainable, cost),
    )
