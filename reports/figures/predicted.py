"""Predicted vs measured per level: what the calculators said against what the run measured."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from reports.figures.common import FigureFile, legend, plt, save
from contract.level_result import LevelResult

# summary.json's levels[].predicted.comparisons keys drawn, in this order (times, in ms)
PREDICTED_QUANTITIES = ("step_s", "ttft_s p99", "tpot_s p99", "e2e_s p99")


def _pairs(levels: Sequence[LevelResult], quantity: str) -> list[tuple[str, float, float]]:
    """(level, predicted, measured) for the levels where both sides of `quantity` are known."""
    out = []
    for lvl in levels:
        pair = ((lvl.predicted.comparisons if lvl.predicted else None) or {}).get(quantity)
        if pair is not None and pair.predicted is not None and pair.measured is not None:
            out.append((lvl.level, pair.predicted, pair.measured))
    return out


def predicted_vs_measured(levels: Sequence[LevelResult], out_dir: Path) -> FigureFile | None:
    """One panel per quantity: measured bars and predicted markers per level, relative error on top."""
    drawn = [(q, pairs) for q in PREDICTED_QUANTITIES if (pairs := _pairs(levels, q))]
    if not drawn:
        return None
    fig, axes = plt.subplots(1, len(drawn), figsize=(4.2 * len(drawn), 4.2), squeeze=False)
    for ax, (quantity, pairs) in zip(axes[0], drawn):
        names = [level for level, _, _ in pairs]
        predicted = np.array([p for _, p, _ in pairs]) * 1000
        measured = np.array([m for _, _, m in pairs]) * 1000
        x = np.arange(len(pairs))
        ax.bar(x, measured, color="tab:blue", alpha=0.6, label="measured")
        ax.plot(x, predicted, "D", color="tab:orange", label="predicted")
        for xi, p, m in zip(x, predicted, measured):
            if m > 0:
                ax.annotate(f"{p / m - 1:+.0%}", (xi, max(p, m)), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(x, names, rotation=45, ha="right", fontsize=7)
        ax.set_title(quantity, fontsize=9)
        ax.set_ylabel("ms")
        ax.grid(alpha=0.3, axis="y")
        legend(ax, fontsize=7)
    fig.suptitle("predicted (calculators, simulator) vs measured per level; labels: predicted / measured - 1")
    return save(fig, out_dir, "predicted_vs_measured.png", "predicted vs measured",
                "Bars: measured; diamonds: the calculators' prediction for the same level.")
