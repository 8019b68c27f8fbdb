"""Resource figures: utilization and memory over time with levels shaded; batch size and KV vs load."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from reports.figures.common import FigureFile, legend, offered_kinds, offered_x, plt, save, strategy_colours
from reports.level_ids import offered_axis_label
from reports.run_data import RunData
from reports.verdict import by_strategy
from contract.level_result import LevelResult

GIB = 1 << 30
MAX_POINTS_PER_LINE = 1500  # long runs are binned to this many means per device: the PNG cannot show more


def _binned(rows, t0: float):
    """(time since t0, util %, memory GiB) averaged into at most MAX_POINTS_PER_LINE time bins."""
    t = rows["t"].to_numpy() - t0
    frame = rows.assign(t_rel=t)[["t_rel", "util_pct", "mem_used_bytes"]]
    if len(frame) > MAX_POINTS_PER_LINE:
        bins = ((t - t.min()) / (np.ptp(t) or 1.0) * (MAX_POINTS_PER_LINE - 1)).astype(int)
        frame = frame.groupby(bins).mean()
    return frame["t_rel"], frame["util_pct"], frame["mem_used_bytes"] / GIB


def resources_timeseries(data: RunData, levels: Sequence[LevelResult], out_dir: Path) -> FigureFile | None:
    """Utilization (%) and memory used (GiB) per device over the run, each level's window shaded."""
    samples = data.samples
    if samples is None or samples.empty:
        return None
    starts = (lvl.spans[0][0] for lvl in levels if lvl.spans)
    t0 = float(min(samples["t"].min(), min(starts, default=samples["t"].min())))
    fig, (ax_util, ax_mem) = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
    keys = (samples["source"].astype("string").fillna("?").astype(str) + ":"
            + samples["device"].astype("string").fillna("").astype(str))   # an all-empty column reads as float64
    for key, rows in samples.groupby(keys, sort=True):
        t, util, mem_gib = _binned(rows.sort_values("t"), t0)
        label = key.rstrip(":")
        ax_util.plot(t, util, lw=1, label=label)
        ax_mem.plot(t, mem_gib, lw=1, label=label)
    shade = plt.get_cmap("Pastel1")
    for i, lvl in enumerate(levels):
        for start, end in lvl.spans:   # one per round of a level measured in rounds
            start, end = start - t0, end - t0
            for ax in (ax_util, ax_mem):
                ax.axvspan(start, end, color=shade(i % 9), alpha=0.5, lw=0)
            ax_util.text((start + end) / 2, 1.0, lvl.level, transform=ax_util.get_xaxis_transform(),
                         rotation=90, fontsize=6, ha="center", va="top")
    ax_util.set_ylabel("utilization (%)")
    ax_mem.set_ylabel("memory used (GiB)")
    ax_mem.set_xlabel("time since start of run (s)")
    for ax in (ax_util, ax_mem):
        ax.grid(alpha=0.3)
        legend(ax, fontsize=7, loc="lower right")
    fig.suptitle("device / host utilization and memory (shaded: measurement window of each level)")
    return save(fig, out_dir, "resources_timeseries.png", "utilization and memory over time",
                "From samples.csv (NVML per GPU, or host CPU and process memory); levels shaded.")


def batch_and_kv_vs_load(levels: Sequence[LevelResult], out_dir: Path) -> FigureFile | None:
    """Mean engine batch size and mean KV-cache usage per level vs offered load (server_metrics.csv)."""
    kinds = offered_kinds(levels)
    groups = by_strategy(levels)
    has_server = any(lvl.server.get("batch_size_mean") is not None
                     or lvl.server.get("kv_usage_mean") is not None for lvl in levels)
    if not kinds or not has_server:
        return None
    colours = strategy_colours(list(groups))
    fig, axes = plt.subplots(2, len(kinds), figsize=(6.5 * len(kinds), 6.5), squeeze=False)
    for col, kind in enumerate(kinds):
        ax_batch, ax_kv = axes[0][col], axes[1][col]
        for strategy, group in groups.items():
            group = [lvl for lvl in group if lvl.offered.kind == kind]
            batch = [(offered_x(lvl), lvl.server["batch_size_mean"]) for lvl in group
                     if lvl.server.get("batch_size_mean") is not None]
            kv = [(offered_x(lvl), lvl.server["kv_usage_mean"] * 100) for lvl in group
                  if lvl.server.get("kv_usage_mean") is not None]
            if batch:
                ax_batch.plot(*zip(*batch), "-o", color=colours[strategy], label=strategy)
            if kv:
                ax_kv.plot(*zip(*kv), "-o", color=colours[strategy], label=strategy)
        ax_batch.set_ylabel("mean batch size (sequences/step)")
        ax_kv.set_ylabel("mean KV-cache blocks used (%)")
        ax_kv.set_xlabel(offered_axis_label(kind))
        for ax in (ax_batch, ax_kv):
            ax.grid(alpha=0.3)
            legend(ax, fontsize=7)
    fig.suptitle("what the server did: batch size and KV-cache usage vs load")
    return save(fig, out_dir, "batch_kv_vs_load.png", "batch size and KV usage vs load",
                "Means over each level's window of servecap_batch_size and servecap_kv_blocks_used/total.")
