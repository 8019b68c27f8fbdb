"""Per-pair ratios B/A over time, one panel per gated metric, with the interval and threshold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from reports.figures.common import FigureFile, plt, save
from reports.paired.decision import CompareVerdict
from reports.paired.slices import pair_arrays

NAME = "compare_ratios.png"


def ratios_figure(table: pd.DataFrame, verdict: CompareVerdict, pair_times: dict[int, float],
                  out_dir: Path) -> FigureFile:
    """`pair_times`: {pair: seconds since the first pair started} for the x axis."""
    gated = verdict.gated_results()
    fig, axes = plt.subplots(len(gated), 1, figsize=(8, 1.9 * len(gated) + 0.6), sharex=True, squeeze=False)
    for ax, result in zip(axes[:, 0], gated):
        pairs, a, b = pair_arrays(table, result.metric)
        x = np.array([pair_times.get(int(p), np.nan) for p in pairs])
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = b / a
        ax.plot(x, (ratio - 1) * 100, "o", ms=3.5, color="tab:blue", label="pair B/A")
        if result.ratio is not None:
            ax.axhline((result.ratio - 1) * 100, color="tab:blue", lw=1.2, label="estimate")
        if result.ci is not None:
            ax.axhspan((result.ci[0] - 1) * 100, (result.ci[1] - 1) * 100, color="tab:blue", alpha=0.15,
                       label=f"{100 * (1 - 2 * verdict.alpha):.0f}% interval")
        for sign in (1, -1):
            ax.axhline(sign * result.threshold * 100, color="grey", ls="--", lw=0.8)
        ax.axhline(0, color="black", lw=0.5)
        ax.set_ylabel(f"{result.metric}\nchange %", fontsize=8)
        ax.set_title(f"{result.metric}: {result.verdict}", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("time since the first pair (s)")
    axes[0, 0].legend(fontsize=7, loc="upper right")
    return save(fig, out_dir, NAME, "Per-pair ratios B/A over time",
                "Each point is one pair of slices (B's statistic over A's, in %); the line is their "
                "Hodges-Lehmann estimate, the band its interval, the dashed lines the threshold. Drift that moves "
                "both arms alike stays out of the ratios.")
