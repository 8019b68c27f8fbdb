"""Latency figures: percentiles vs load with CI bands, throughput vs latency, goodput, CDFs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from reports.figures.common import (
    METRIC_TITLES, SLO_FOR_METRIC, FigureFile, legend, offered_kinds, offered_x, plt, save, strategy_colours,
)
from reports.level_ids import offered_axis_label
from reports.run_data import RunData
from contract.level_result import LevelResult
from contract.slo import SLO
from contract.summary import Knee
from reports.verdict import KNEE_METRIC, by_strategy

PERCENTILE_STYLES = {"p50": ":", "p95": "--", "p99": "-"}
CDF_POINTS = 400  # quantiles drawn per level: a 100k-request level plots as fast as a 100-request one


def latency_vs_load(levels: Sequence[LevelResult], metric: str, slo: SLO, out_dir: Path) -> FigureFile | None:
    """p50/p95/p99 of one metric vs offered load, per strategy, with 95% CI bands and the SLO line."""
    kinds = offered_kinds(levels)
    groups = by_strategy(levels)
    if not kinds or not any(lvl.metrics[metric].count for lvl in levels):
        return None
    colours = strategy_colours(list(groups))
    limit = slo.limits_s().get(SLO_FOR_METRIC.get(metric, ""))
    fig, axes = plt.subplots(1, len(kinds), figsize=(6.5 * len(kinds), 4.2), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        for strategy, group in groups.items():
            group = [lvl for lvl in group if lvl.offered.kind == kind and lvl.metrics[metric].count]
            if not group:
                continue
            x = [offered_x(lvl) for lvl in group]
            for pct, style in PERCENTILE_STYLES.items():
                y = [lvl.metrics[metric].at(pct) * 1000 for lvl in group]
                ax.plot(x, y, style, marker="o", ms=3, color=colours[strategy], label=f"{strategy} {pct}")
                ci = [lvl.metrics[metric].ci95(pct) for lvl in group]
                if all(c is not None for c in ci):
                    ax.fill_between(x, [c[0] * 1000 for c in ci], [c[1] * 1000 for c in ci],
                                    color=colours[strategy], alpha=0.15, linewidth=0)
        if limit is not None:
            ax.axhline(limit * 1000, color="crimson", lw=1.2, label=f"SLO {limit * 1000:g} ms")
        ax.set_xlabel(offered_axis_label(kind))
        ax.set_ylabel(f"{METRIC_TITLES[metric]} (ms)")
        ax.grid(alpha=0.3)
        legend(ax, fontsize=7, ncol=2)
    fig.suptitle(f"{METRIC_TITLES[metric]}: p50 / p95 / p99 vs offered load (bands: 95% CI)")
    return save(fig, out_dir, f"latency_{metric}.png", f"{METRIC_TITLES[metric]} vs load",
                f"p50 (dotted), p95 (dashed), p99 (solid) of {metric} per strategy; shaded: 95% CI.")


def throughput_vs_latency(levels: Sequence[LevelResult], knees: dict[str, Knee | None],
                          out_dir: Path) -> FigureFile | None:
    """Output tokens/s against p99 end-to-end latency, every strategy on one axes, knees starred."""
    groups = by_strategy(levels)
    if not groups:
        return None
    colours = strategy_colours(list(groups))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for strategy, group in groups.items():
        group = [lvl for lvl in group if lvl.output_tokens_per_s and lvl.metrics[KNEE_METRIC].p99]
        x = [lvl.output_tokens_per_s for lvl in group]
        y = [lvl.metrics[KNEE_METRIC].p99 * 1000 for lvl in group]
        name = "endpoint" if strategy == "-" else strategy   # a --url run has no strategy
        ax.plot(x, y, "-o", color=colours[strategy], label=name)
        for lvl, xi, yi in zip(group, x, y):
            ax.annotate(lvl.level.rpartition("/")[2], (xi, yi), fontsize=7,
                        textcoords="offset points", xytext=(4, 4))
        k = knees.get(strategy)
        if k:
            ax.plot(k.output_tokens_per_s, k.p99_s * 1000, "*", ms=14, color=colours[strategy],
                    markeredgecolor="black", label=f"{name} knee")
    ax.set_xlabel("throughput (output tokens/s)")
    ax.set_ylabel(f"p99 {METRIC_TITLES[KNEE_METRIC]} (ms)")
    ax.set_title("throughput vs latency per strategy (right and low is better)")
    ax.grid(alpha=0.3)
    legend(ax, fontsize=8)
    return save(fig, out_dir, "throughput_vs_latency.png", "throughput vs latency",
                "Each point is a load level (labelled by its offered load); stars mark each strategy's knee.")


def goodput_vs_load(levels: Sequence[LevelResult], slo: SLO, out_dir: Path) -> FigureFile | None:
    """Achieved request rate (dashed) and goodput under every SLO (solid) vs offered load."""
    kinds = offered_kinds(levels)
    groups = by_strategy(levels)
    if not kinds:
        return None
    colours = strategy_colours(list(groups))
    fig, axes = plt.subplots(1, len(kinds), figsize=(6.5 * len(kinds), 4.2), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        for strategy, group in groups.items():
            group = [lvl for lvl in group if lvl.offered.kind == kind]
            x = [offered_x(lvl) for lvl in group]
            ax.plot(x, [lvl.request_rate_rps or 0 for lvl in group], "--o", ms=3,
                    color=colours[strategy], label=f"{strategy} achieved")
            if slo.is_set:
                ax.plot(x, [lvl.goodput_rps or 0 for lvl in group], "-o", color=colours[strategy],
                        label=f"{strategy} goodput")
        ax.set_xlabel(offered_axis_label(kind))
        ax.set_ylabel("requests/s")
        ax.grid(alpha=0.3)
        legend(ax, fontsize=7)
    fig.suptitle("goodput vs offered load" + ("" if slo.is_set else " (no SLO given: achieved rate only)"))
    return save(fig, out_dir, "goodput_vs_load.png", "goodput vs load",
                "Solid: requests/s meeting every SLO (DistServe goodput); dashed: all ok requests/s.")


def latency_cdfs(data: RunData, levels: Sequence[LevelResult], out_dir: Path) -> FigureFile | None:
    """Empirical CDFs of TTFT, TPOT and E2E per level (ok, measure-phase records)."""
    if not levels:
        return None
    metrics = ("ttft_s", "tpot_s", "e2e_s")
    ok = data.records.loc[data.measured_ok(), ["level", *metrics]]
    by_level = dict(tuple(ok.groupby("level", sort=False, observed=True)))
    fig, axes = plt.subplots(1, len(metrics), figsize=(15, 4.2))
    cmap = plt.get_cmap("viridis")
    probs = np.linspace(0, 1, CDF_POINTS)
    for ax, metric in zip(axes, metrics):
        for i, lvl in enumerate(levels):
            values = by_level.get(lvl.level)
            values = values[metric].dropna().to_numpy() if values is not None else np.empty(0)
            if len(values):
                ax.plot(np.quantile(values, probs) * 1000, probs, lw=1.2,
                        color=cmap(i / max(len(levels) - 1, 1)), label=lvl.level)
        ax.set_xscale("log")
        ax.set_xlabel(f"{METRIC_TITLES[metric]} (ms, log)")
        ax.set_ylabel("fraction of requests")
        ax.grid(alpha=0.3)  # major lines only: a minor log grid triples the drawing time
    legend(axes[-1], fontsize=6, ncol=1 + len(levels) // 12)
    fig.suptitle("latency CDFs per level")
    return save(fig, out_dir, "latency_cdf.png", "latency CDFs",
                "Empirical CDF of each level's ok measure-phase requests; colour runs with the level order.")
