"""How far a what-if lies outside what its calibration measured, and how much wider its answer is for it.

    calibrated(samples)                       -> Coverage   what the calibration levels measured
    distance(coverage, lengths, kind, cv2)    -> {axis: {...}, "factor"}   per axis, and in all
    widened(metrics, factor)                  -> the metrics with every interval widened

Axes:
    prompt_tokens, output_tokens   the what-if's lengths against the calibration's measured ones:
                                   the ratio of the means, and the share of the what-if's requests
                                   longer (or shorter) than any calibrated one. Its factor is how far
                                   past the calibrated range its mean lies (1 inside it)
    arrivals                       closed loop or open, and the gaps' cv^2, against the calibration's;
                                   a closed-loop calibration asked for an open loop counts as one
                                   doubling, and each doubling of cv^2 away from 1 as another
    load                           each predicted load's output tokens/s against the calibrated levels'
                                   range (per row: `load_factor`)

The interval widens by WIDEN_PER_DOUBLING of the value for every doubling outside, over every axis:
    widening = WIDEN_PER_DOUBLING x sum(log2(axis factor)),  interval [lo - w x value, hi + w x value]
The rate is the transfer benchmark's (`lab.servecap.transfer`): what its what-ifs missed by per
doubling of distance, beyond the interpolation's own error. Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

WIDEN_PER_DOUBLING = 0.10


@dataclass(frozen=True)
class Coverage:
    prompt: tuple[float, float, float]          # min, mean, max measured prompt tokens
    output: tuple[float, float, float]          # likewise, output tokens
    level_means: tuple[tuple[float, float], ...]   # each level's (prompt mean, output mean)
    kinds: tuple[str, ...]                      # "concurrency" and/or "rate_rps"
    cv2: float | None                           # the open-loop levels' cv^2 (None: closed loop only)
    tokens_per_s: tuple[float, float]           # the levels' output tokens/s, lowest and highest


def calibrated(samples, cv2: float | None) -> Coverage:
    """What `samples` (LevelSample, one strategy's calibration levels) measured; `cv2`: their open
    loop's arrival cv^2 (ignored when every level is a closed loop)."""
    lengths = np.concatenate([s.lengths for s in samples])
    rates = [s.output_tokens_per_s for s in samples if s.output_tokens_per_s]
    kinds = tuple(sorted({s.kind for s in samples}))
    return Coverage(prompt=(float(lengths[:, 0].min()), float(lengths[:, 0].mean()), float(lengths[:, 0].max())),
                    output=(float(lengths[:, 1].min()), float(lengths[:, 1].mean()), float(lengths[:, 1].max())),
                    level_means=tuple((float(s.lengths[:, 0].mean()), float(s.lengths[:, 1].mean()))
                                      for s in samples if len(s.lengths)),
                    kinds=kinds, cv2=cv2 if "rate_rps" in kinds else None,
                    tokens_per_s=(min(rates), max(rates)) if rates else (0.0, 0.0))


def _outside(value: float, low: float, high: float) -> float:
    """1 inside [low, high]; how many times past the nearer end otherwise."""
    if value > high > 0:
        return value / high
    if 0 < value < low:
        return low / value
    return 1.0


def _lengths_axis(asked: np.ndarray, measured: tuple[float, float, float], level_means: list[float]) -> dict:
    low, mean, high = measured
    asked_mean = float(asked.mean())
    return {"calibrated": {"min": low, "mean": mean, "max": high},
            "asked_mean": asked_mean, "ratio_of_means": asked_mean / mean if mean else None,
            "share_outside": float(np.mean((asked < low) | (asked > high))),
            "factor": _outside(asked_mean, min(level_means), max(level_means))}


def distance(coverage: Coverage, lengths: np.ndarray, kind: str, cv2: float) -> dict:
    """Per axis, how far the what-if (its (prompt, output) pairs [n, 2], "concurrency" or "rate_rps",
    its arrival cv^2) lies from the calibration; "factor" multiplies the axes' factors."""
    axes = {"prompt_tokens": _lengths_axis(lengths[:, 0], coverage.prompt, [m[0] for m in coverage.level_means]),
            "output_tokens": _lengths_axis(lengths[:, 1], coverage.output, [m[1] for m in coverage.level_means])}
    if kind == "concurrency":
        factor = 1.0 if "concurrency" in coverage.kinds else 2.0
    else:
        closed_only = coverage.cv2 is None
        reference = 1.0 if closed_only else coverage.cv2
        factor = (2.0 if closed_only else 1.0) * max(cv2 / reference, reference / cv2)
    axes["arrivals"] = {"calibrated": "closed loop" if coverage.cv2 is None and "rate_rps" not in coverage.kinds
                        else f"open loop, cv^2 {coverage.cv2:g}",
                        "asked": "closed loop" if kind == "concurrency" else f"open loop, cv^2 {cv2:g}",
                        "factor": factor}
    axes["factor"] = math.prod(axes[name]["factor"] for name in ("prompt_tokens", "output_tokens", "arrivals"))
    return axes


def load_factor(coverage: Coverage, tokens_per_s: float) -> float:
    """How far a predicted load's output tokens/s lies outside the calibrated levels' (1 inside)."""
    return _outside(tokens_per_s, *coverage.tokens_per_s) if tokens_per_s > 0 else 1.0


def widening(factor: float) -> float:
    """The interval's extra half-width, as a share of the value, for an overall distance `factor`."""
    return WIDEN_PER_DOUBLING * math.log2(max(factor, 1.0))


def widened(metrics: dict, share: float) -> dict:
    """`metrics` ({metric: {q: {"value", "interval"}}}) with each interval widened by `share` of its value."""
    if share <= 0:
        return metrics
    out = {}
    for metric, quantiles in metrics.items():
        out[metric] = {}
        for q, entry in quantiles.items():
            value, interval = entry.get("value"), entry.get("interval")
            if value is None or interval is None:
                out[metric][q] = entry
                continue
            out[metric][q] = {**entry, "interval": [max(interval[0] - share * value, 0.0), interval[1] + share * value]}
    return out


def describe_distance(axes: dict) -> str:
    """One line: each axis outside the calibration, as a user reads it."""
    parts = []
    for name in ("prompt_tokens", "output_tokens"):
        axis = axes[name]
        if axis["factor"] > 1 or axis["share_outside"] > 0:
            parts.append(f"{name.replace('_', ' ')} mean {axis['asked_mean']:.0f} = {axis['ratio_of_means']:.2g}x the "
                         f"calibrated {axis['calibrated']['mean']:.0f}, {axis['share_outside']:.0%} of requests outside "
                         f"its {axis['calibrated']['min']:.0f}-{axis['calibrated']['max']:.0f}")
    arrivals = axes["arrivals"]
    if arrivals["factor"] > 1:
        parts.append(f"arrivals {arrivals['asked']}, calibrated on {arrivals['calibrated']}")
    return "; ".join(parts) or "loads outside the calibrated output tokens/s"
