"""summary.json, typed: the owner of its shape. A run's report (reports.report.build_summary) or a
side-by-side report (reports.side_by_side) builds a `Summary`; the file is written from `to_dict()`
and read back with `Summary.from_dict(json.load(...))` (the gate, tests), which takes older files:
a key they lack keeps its default, a key this version does not know stays in `extra`. Fields are
only ever added; the notebooks read the file as JSON, so `to_dict()` keeps the keys, their order
and their nulls.

    {"run": run.json as read, "levels": [LevelResult], "validation": ValidationSummary,
     "verdict": Verdict, "missing": [str], "loadgen_warnings": [str], "unstable_levels": [UnstableLevel],
     "machine_drift_levels": [DriftLevel], "diagnostics": bool, "metrics": [latency names],
     "quality": quality.json | null, "policies": [PolicyRow] (a fleet run's traffic policies; absent otherwise)}
    side by side: {"run": {"side_by_side": [{"label", "name", "setup"}]}, "levels", "verdict", "metrics",
     "speculation_crossover": SpeculationCrossover | null, "configurations": [str], "quality": {label: ...},
     "missing", "loadgen_warnings", "unstable_levels", "machine_drift_levels"}

A level is contract.level_result.LevelResult. Free-form by nature, and so mappings: `run` (run.json,
typed by contract.run_json when read for itself), a price's `cost`, a calibration's description,
quality.json. Pure: plain floats, no numpy or pandas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from contract.fleet_policies import PolicyRow
from contract.level_result import Interval, LevelResult, Offered
from contract.sections import FrozenSection, keep_null, note, null_as
from contract.slo import SLO


def jsonable(value: Any) -> Any:
    """Strict JSON: NaN and infinities become null, numpy scalars Python numbers, tuples lists, keys strings."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if not isinstance(value, (str, bytes, int, float)) and callable(getattr(value, "item", None)):
        value = value.item()   # a numpy scalar
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# --- the verdict (reports.verdict) ---

@dataclass(frozen=True, kw_only=True)
class Interpolated(FrozenSection):
    """Where the p99 crosses the limit between the last passing and the first failing level."""

    offered_load: float | None = keep_null()
    output_tokens_per_s: float | None = keep_null()


@dataclass(frozen=True, kw_only=True)
class SustainableRow(FrozenSection):
    """The highest level of one strategy, walking up its load, before the first that breaks one SLO
    (`slo`: a latency column, or "all"). `confidence`: "high" (the p99's 95% interval under the limit
    too), "low", or None when no level meets it."""

    strategy: str | None = keep_null()
    slo: str | None = keep_null()
    limit_s: float | None = keep_null()
    level: str | None = keep_null()
    offered: Offered | None = keep_null()
    request_rate_rps: float | None = keep_null()
    output_tokens_per_s: float | None = keep_null()
    p99_s: float | None = keep_null()
    p99_ci95: Interval | None = keep_null()
    confidence: str | None = keep_null()
    confident_level: str | None = keep_null()
    first_failing_level: str | None = keep_null()
    failing_reason: str | None = keep_null()
    interpolated: Interpolated | None = keep_null()


@dataclass(frozen=True, kw_only=True)
class Knee(FrozenSection):
    """The knee of one strategy's throughput-latency curve (Kneedle on output tokens/s against p99)."""

    level: str | None = keep_null()
    offered: Offered | None = null_as(dict)
    metric: str | None = keep_null()
    output_tokens_per_s: float | None = keep_null()
    request_rate_rps: float | None = keep_null()
    p99_s: float | None = keep_null()


@dataclass(frozen=True, kw_only=True)
class OperatingPoint(FrozenSection):
    """The level the report prices, and why (`basis`)."""

    level: str | None = keep_null()
    strategy: str | None = keep_null()
    offered: Offered | None = null_as(dict)
    basis: str | None = keep_null()
    output_tokens_per_s: float | None = keep_null()
    request_rate_rps: float | None = keep_null()
    total_tokens_per_s: float | None = keep_null()


@dataclass(frozen=True, kw_only=True)
class Verdict(FrozenSection):
    """summary.json's `verdict`. `cost`: reports.cost's price at the operating point, or {"unavailable": why};
    `cost_by_strategy`: each strategy's at its max sustainable level."""

    slo: SLO = field(default_factory=SLO)
    max_sustainable: tuple[SustainableRow, ...] = ()
    knee: dict[str, Knee | None] = field(default_factory=dict)
    operating_point: OperatingPoint | None = keep_null()
    cost: dict[str, Any] = field(default_factory=dict)
    cost_by_strategy: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["slo"] = self.slo.as_dict()   # every limit, set or not
        return out


# --- the validation (reports.predict.validation) ---

@dataclass(frozen=True, kw_only=True)
class HeldOut(FrozenSection):
    """A held-out level's prediction against its measurement (relative_error = predicted / measured - 1)."""

    predicted: float | None = keep_null()
    measured: float | None = keep_null()
    relative_error: float | None = keep_null()


@dataclass(frozen=True, kw_only=True)
class PredictedQuantile(FrozenSection):
    """The median over the simulator's replications and their 95% spread."""

    value: float | None = keep_null()
    interval: Interval | None = keep_null()


@dataclass(frozen=True, kw_only=True)
class StrategyValidation(FrozenSection):
    median_abs_error: dict[str, float | None] = field(default_factory=dict)
    levels_in_median: tuple[str, ...] = ()
    widest_gap: float | None = keep_null()
    sparse_grid: bool = keep_null(False)
    max_output_tokens_per_s: float | None = keep_null()
    calibration: dict[str, Any] | None = keep_null()   # reports.predict.calibration.Calibration.describe()


@dataclass(frozen=True, kw_only=True)
class ValidationSummary(FrozenSection):
    """summary.json's `validation`: leave-one-level-out (its shape and rules: reports.predict.validation).
    `levels`: {level: {"ttft_s.p50": HeldOut, ...}}; `predictions`: {level: {metric: {q: PredictedQuantile}}};
    `keys`: the judged keys (None in a file from before it said)."""

    method: str | None = keep_null()
    levels: dict[str, dict[str, HeldOut]] = field(default_factory=dict)
    median_abs_error: dict[str, float | None] = field(default_factory=dict)
    keys: tuple[str, ...] | None = None
    predictions: dict[str, dict[str, dict[str, PredictedQuantile]]] = field(default_factory=dict)
    by_strategy: dict[str, StrategyValidation] = field(default_factory=dict)
    replications: int | None = keep_null()
    unavailable: tuple[str, ...] = ()


# --- the run's notes ---

@dataclass(frozen=True, kw_only=True)
class UnstableLevel(FrozenSection):
    """A level the sweep flagged: its throughput's spread over its thirds (or rounds) over the tolerance."""

    level: str | None = keep_null()
    spread: float | None = keep_null()


@dataclass(frozen=True, kw_only=True)
class DriftLevel(FrozenSection):
    """A level steady as a server while the machine's own speed drifted (sweep --diagnostics)."""

    level: str | None = keep_null()
    spread: float | None = keep_null()
    machine: float | None = keep_null()
    at_constant_speed: float | None = keep_null()


@dataclass(frozen=True, kw_only=True)
class SpeculationCrossover(FrozenSection):
    """reports.speculation.measured_crossover: where the speculating curve stops beating the plain one."""

    speculating: str | None = keep_null()
    plain: str | None = keep_null()
    axis: str | None = keep_null()
    levels: tuple[float, ...] = ()
    tpot_level: float | None = keep_null()
    throughput_level: float | None = keep_null()
    statement: str | None = keep_null()


RUN_KEYS = ("run", "levels", "validation", "verdict", "missing", "loadgen_warnings", "unstable_levels",
            "machine_drift_levels", "diagnostics", "metrics", "quality", "policies")
SIDE_BY_SIDE_KEYS = ("run", "levels", "verdict", "metrics", "speculation_crossover", "configurations", "quality",
                     "missing", "loadgen_warnings", "unstable_levels", "machine_drift_levels")


@dataclass(frozen=True, kw_only=True)
class Summary(FrozenSection):
    """The whole of summary.json (module docstring). A side-by-side report's (`side_by_side`) has no
    validation or diagnostics, and its own `speculation_crossover` and `configurations`."""

    run: dict[str, Any] = field(default_factory=dict)
    levels: tuple[LevelResult, ...] = ()
    validation: ValidationSummary | None = None
    verdict: Verdict = field(default_factory=Verdict)
    missing: tuple[str, ...] = ()
    loadgen_warnings: tuple[str, ...] = ()
    unstable_levels: tuple[UnstableLevel, ...] = ()
    machine_drift_levels: tuple[DriftLevel, ...] = ()
    diagnostics: bool | None = None
    metrics: tuple[str, ...] = ()
    quality: dict[str, Any] | None = keep_null()
    speculation_crossover: SpeculationCrossover | None = keep_null()
    configurations: tuple[str, ...] = ()
    policies: tuple[PolicyRow, ...] | None = None   # a fleet run's (contract.fleet_policies); None: not a fleet's

    @property
    def side_by_side(self) -> bool:
        return "side_by_side" in self.run

    def level(self, level_id: str) -> LevelResult | None:
        return next((lvl for lvl in self.levels if lvl.level == level_id), None)

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON object, strict (NaN as null), its keys in the order the file has always had."""
        written = super().to_dict()
        keys = SIDE_BY_SIDE_KEYS if self.side_by_side else RUN_KEYS
        out = {key: written[key] for key in keys if key in written}
        out.update(self.extra)
        return jsonable(out)

    @classmethod
    def from_dict(cls, data: Any, problems: list[str] | None = None, where: str = "summary.json") -> Summary:
        """Tolerant: a level entry that is not an object with a "level" is left out, with a sentence."""
        if isinstance(data, dict) and isinstance(data.get("levels"), list):
            entries = data["levels"]
            kept = [entry for entry in entries if isinstance(entry, dict) and isinstance(entry.get("level"), str)]
            if len(kept) < len(entries):
                note(problems, f"{where}: {len(entries) - len(kept)} level entries without a level id; left out")
            data = {**data, "levels": kept}
        return super().from_dict(data, problems, where)
