"""The verdict of a compare run: each metric judged over its pairs, the run's exit code.

Gated metrics decide the exit code; the others are reported beside them. By default the
gate is the p50 of TTFT, TPOT, ITL and E2E and output tokens/s, each at 5%; p90s and
server CPU per output token are shown but only gate when `--max-regression` names them
(the same syntax as `servecap gate`). Exit codes: 0 no regression (every gated metric
SAME or BETTER), 1 regression (any gated metric WORSE), 3 undecided (no WORSE, but some
gated metric still UNKNOWN when the pairs or the time ran out).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reports.paired.slices import METRIC_KEYS, higher_is_worse, pair_arrays
from reports.paired.stats import BETTER, SAME, UNKNOWN, WORSE, PairedResult, judge, paired_bootstrap_ratio

DEFAULT_THRESHOLD = 0.05
DEFAULT_GATED = ("ttft_s.p50", "tpot_s.p50", "itl_s.p50", "e2e_s.p50", "output_tokens_per_s")
EXIT_NO_REGRESSION, EXIT_REGRESSION, EXIT_UNUSABLE, EXIT_UNDECIDED = 0, 1, 2, 3


@dataclass(frozen=True)
class ArmQuantile:
    """A whole-arm statistic (p99 over every measured request of the arm), B over A."""

    metric: str
    a: float
    b: float
    ratio: float
    ci: tuple[float, float]


@dataclass
class CompareVerdict:
    results: list[PairedResult]
    gated: tuple[str, ...]
    arm_p99: list[ArmQuantile] = field(default_factory=list)
    alpha: float = 0.05      # the last look's (each result carries the alpha of the look that judged it)

    def gated_results(self) -> list[PairedResult]:
        return [r for r in self.results if r.metric in self.gated]

    @property
    def worse(self) -> list[str]:
        return [r.metric for r in self.gated_results() if r.verdict == WORSE]

    @property
    def undecided(self) -> list[str]:
        return [r.metric for r in self.gated_results() if r.verdict == UNKNOWN]

    @property
    def exit_code(self) -> int:
        if self.worse:
            return EXIT_REGRESSION
        return EXIT_UNDECIDED if self.undecided else EXIT_NO_REGRESSION

    @property
    def summary(self) -> str:
        if self.worse:
            return "REGRESSION: B is worse on " + ", ".join(self.worse)
        if self.undecided:
            return "UNDECIDED: more pairs needed for " + ", ".join(self.undecided)
        better = [r.metric for r in self.gated_results() if r.verdict == BETTER]
        return "NO REGRESSION" + (f" (B is better on {', '.join(better)})" if better else "")


def thresholds_for(max_regression: dict[str, float] | None, *, replace_defaults: bool = False) -> dict[str, float]:
    """{metric key: threshold} of the gated metrics: the defaults, overridden/extended by the user's."""
    gated = {} if replace_defaults else {key: DEFAULT_THRESHOLD for key in DEFAULT_GATED}
    for key, limit in (max_regression or {}).items():
        if key not in METRIC_KEYS:
            raise ValueError(f"compare cannot gate {key!r}; it measures {', '.join(METRIC_KEYS)}")
        gated[key] = limit
    if not gated:
        raise ValueError("nothing to gate: give --max-regression")
    return gated


def decide(table: pd.DataFrame, gated: dict[str, float], *, alpha: float | None = None,
           looks: list[tuple[int | None, float]] | None = None, seed: int = 0,
           arm_values: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] | None = None) -> CompareVerdict:
    """Judge every metric of the per-slice `table` (reports.paired.slices.slice_table).

    `looks`: the sequential analysis's looks in order, [(pairs, alpha), ...] (pairs None = all).
    Each metric is judged at each look on the pairs numbered below `pairs`, at that look's alpha,
    until a look decides it (SAME, WORSE or BETTER); it keeps that look's verdict, as a group-
    sequential test stops at the look whose boundary it crosses (a later, smaller alpha share
    must not undo it). A metric no look decides keeps the last look's UNKNOWN. Without `looks`:
    one look at `alpha` over every pair.
    Ungated metrics are judged at the default threshold, for information.
    `arm_values`: {metric: (per-pair raw values of arm A, of arm B)} for the whole-arm p99s."""
    if looks is None:
        if alpha is None:
            raise ValueError("decide needs alpha or looks")
        looks = [(None, alpha)]
    if not looks:
        raise ValueError("decide needs at least one look")
    results = []
    for key in METRIC_KEYS:
        pairs, a, b = pair_arrays(table, key)
        if not (np.isfinite(a) & np.isfinite(b)).any():
            continue
        for upto, look_alpha in looks:
            seen = np.ones(len(pairs), dtype=bool) if upto is None else pairs < upto
            result = judge(key, a[seen], b[seen], threshold=gated.get(key, DEFAULT_THRESHOLD),
                           higher_is_worse=higher_is_worse(key), alpha=look_alpha)
            if result.verdict != UNKNOWN:
                break
        results.append(result)
    arm_p99 = []
    for metric, (a_values, b_values) in (arm_values or {}).items():
        found = paired_bootstrap_ratio(a_values, b_values, lambda v: np.percentile(v, 99), seed=seed)
        if found is not None:
            ratio, ci = found
            a_all, b_all = np.concatenate(a_values), np.concatenate(b_values)
            arm_p99.append(ArmQuantile(f"{metric}.p99", float(np.percentile(a_all, 99)),
                                       float(np.percentile(b_all, 99)), ratio, ci))
    return CompareVerdict(results, tuple(k for k in METRIC_KEYS if k in gated), arm_p99, looks[-1][1])


__all__ = ["SAME", "WORSE", "BETTER", "UNKNOWN", "CompareVerdict", "ArmQuantile", "decide", "thresholds_for",
           "DEFAULT_GATED", "DEFAULT_THRESHOLD", "EXIT_NO_REGRESSION", "EXIT_REGRESSION", "EXIT_UNUSABLE",
           "EXIT_UNDECIDED"]
