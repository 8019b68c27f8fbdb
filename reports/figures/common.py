"""Shared pieces of the report figures: the Agg backend, colours per strategy, saving."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: the report runs in CI and over SSH
import matplotlib.pyplot as plt  # noqa: E402

from contract.level_result import LevelResult  # noqa: E402

DPI = 110
METRIC_TITLES = {
    "ttft_s": "time to first token", "tpot_s": "time per output token",
    "itl_s": "inter-token latency", "e2e_s": "end-to-end latency",
    "ttfa_s": "time to first answer token",
}
SLO_FOR_METRIC = {"ttft_s": "ttft_s", "tpot_s": "tpot_s", "e2e_s": "e2e_s"}


@dataclass(frozen=True)
class FigureFile:
    """A PNG written into the run directory, with the words the reports put around it."""

    name: str
    title: str
    caption: str


def strategy_colours(strategies: list[str]) -> dict[str, tuple]:
    cmap = plt.get_cmap("tab10")
    return {s: cmap(i % 10) for i, s in enumerate(strategies)}


def offered_x(level: LevelResult) -> float:
    return float(level.offered.value)


def offered_kinds(levels: Sequence[LevelResult]) -> list[str]:
    """Offered-load kinds present, in a stable order (one x axis each)."""
    kinds = {lvl.offered.kind for lvl in levels if lvl.offered}
    return [k for k in ("concurrency", "rate_rps") if k in kinds]


def legend(ax, **kwargs) -> None:
    """A legend only when something on the axes is labelled (an empty one only warns)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kwargs)


def save(fig, out_dir: Path, name: str, title: str, caption: str) -> FigureFile:
    fig.tight_layout()
    fig.savefig(out_dir / name, dpi=DPI)
    plt.close(fig)
    return FigureFile(name, title, caption)
