"""Predicted vs measured, one figure per metric: each level predicted without having seen it.

One panel per strategy, offered load on x: the leave-one-level-out prediction's p50 (dashed) and
p99 (solid) as curves with their spread over replications shaded, the measured p50 (circles) and
p99 (triangles) as points. From summary.json's `validation` (reports.predict.validation).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from reports.figures.common import METRIC_TITLES, FigureFile, legend, offered_x, plt, save, strategy_colours
from reports.level_ids import offered_axis_label
from reports.verdict import by_strategy
from contract.level_result import LevelResult
from contract.summary import ValidationSummary

MARKERS = {"p50": ("--", "o"), "p99": ("-", "^")}


def predicted_vs_measured(levels: Sequence[LevelResult], validation: ValidationSummary, metric: str,
                          out_dir: Path) -> FigureFile | None:
    predictions = validation.predictions
    groups = {s: [lvl for lvl in g if lvl.level in predictions and lvl.offered]
              for s, g in by_strategy(levels).items()}
    groups = {s: g for s, g in groups.items() if g}
    if not groups:
        return None
    colours = strategy_colours(list(by_strategy(levels)))
    fig, axes = plt.subplots(1, len(groups), figsize=(4.6 * len(groups), 3.8), squeeze=False)
    for ax, (strategy, group) in zip(axes[0], groups.items()):
        x = [offered_x(lvl) for lvl in group]
        for q, (line, marker) in MARKERS.items():
            predicted = [predictions[lvl.level][metric][q] for lvl in group]
            y = [p.value * 1000 if p.value is not None else float("nan") for p in predicted]
            ax.plot(x, y, line, color=colours[strategy], label=f"predicted {q}")
            spread = [p.interval for p in predicted]
            if all(s is not None for s in spread):
                ax.fill_between(x, [s[0] * 1000 for s in spread], [s[1] * 1000 for s in spread],
                                color=colours[strategy], alpha=0.15 if q == "p99" else 0.25, linewidth=0)
            measured = [lvl.metrics[metric].at(q) for lvl in group]
            ax.plot(x, [m * 1000 if m is not None else float("nan") for m in measured], marker, ls="none",
                    color="black", ms=5, mfc="white" if q == "p50" else "black", label=f"measured {q}")
        kind = group[0].offered.kind
        ax.set_xscale("log", base=2)
        ax.set_xlabel(offered_axis_label(kind))
        ax.set_ylabel(f"{METRIC_TITLES[metric]} (ms)")
        ax.set_title(strategy, fontsize=10)
        ax.grid(alpha=0.3)
        legend(ax, fontsize=7)
    fig.suptitle(f"{METRIC_TITLES[metric]}: predicted (each level left out of its own calibration) vs measured")
    return save(fig, out_dir, f"validation_{metric}.png", f"{METRIC_TITLES[metric]}: predicted vs measured",
                "Lines: the simulator's p50 (dashed) and p99 (solid) for each level, calibrated on the strategy's "
                "other levels; shaded: the 95% spread over replications of the measured run's length. "
                "Points: measured p50 (open circles) and p99 (filled triangles).")
