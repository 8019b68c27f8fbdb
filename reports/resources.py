"""Server-side and device means over one level's time window. Pure: frames in, dicts out.

A level's window is the span of its measure-phase records (first send to last
byte). server_metrics.csv is long-form Prometheus scrapes (t, name, labels,
value); samples.csv has one row per device (or the host) per sampling tick.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

# gauge name -> key in summary.json's `server`
SERVER_GAUGES = {
    "servecap_requests_running": "requests_running_mean",
    "servecap_requests_waiting": "requests_waiting_mean",
    "servecap_kv_blocks_used": "kv_blocks_used_mean",
    "servecap_kv_blocks_total": "kv_blocks_total",
    "servecap_kv_block_bytes": "kv_block_bytes",
}
# histogram stem -> key of its window mean in summary.json's `server`
SERVER_HISTOGRAMS = {
    "servecap_batch_size": "batch_size_mean",
    "servecap_engine_step_seconds": "step_time_mean_s",
}
DEVICE_COLUMNS = ("util_pct", "mem_used_bytes", "mem_total_bytes", "sm_clock_mhz", "temp_c")


def _clean(value: float) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _in_window(frame: pd.DataFrame, start: float, end: float) -> pd.DataFrame:
    return frame[(frame["t"] >= start) & (frame["t"] <= end)]


def server_means(metrics: pd.DataFrame | None, start: float, end: float) -> dict:
    """Means of the servecap gauges, mean batch size and mean engine step time over [start, end].

    Gauges with several label sets are summed per scrape, then averaged over
    scrapes. A histogram's mean (batch size, step time) = delta(histogram _sum) / delta(histogram _count)
    between the last scrape at or before `start` and the last at or before `end`.
    """
    if metrics is None or metrics.empty:
        return {}
    out: dict = {}
    window = _in_window(metrics, start, end)
    for name, key in SERVER_GAUGES.items():
        rows = window[window["name"] == name]
        if len(rows):
            per_scrape = rows.groupby("t")["value"].sum()
            out[key] = _clean(per_scrape.mean())
            if name == "servecap_requests_running":
                out["requests_running_max"] = _clean(per_scrape.max())
    if out.get("kv_blocks_used_mean") is not None and out.get("kv_blocks_total"):
        out["kv_usage_mean"] = out["kv_blocks_used_mean"] / out["kv_blocks_total"]
    for stem, key in SERVER_HISTOGRAMS.items():
        mean = _histogram_mean(metrics, stem, start, end)
        if mean is not None:
            out[key] = mean
    out["scrapes"] = int(window["t"].nunique())
    return out


def _histogram_mean(metrics: pd.DataFrame, stem: str, start: float, end: float) -> float | None:
    totals = {}
    for suffix in ("_sum", "_count"):
        series = metrics[metrics["name"] == stem + suffix].groupby("t")["value"].sum().sort_index()
        if series.empty:
            return None
        before = series[series.index <= start]
        upto_end = series[series.index <= end]
        if upto_end.empty:
            return None
        first = before.iloc[-1] if len(before) else 0.0
        totals[suffix] = upto_end.iloc[-1] - first
    if totals["_count"] <= 0:
        return None
    return float(totals["_sum"] / totals["_count"])


def device_means(samples: pd.DataFrame | None, start: float, end: float) -> dict:
    """Per sample source (`nvml`, `host`, ...): means of util, memory, clock, temperature and power.

    Shape: {"nvml": {"util_pct": .., "mem_used_bytes": .., ..., "power_w": .., "samples": n}}.
    Memory and power are summed across devices per tick (the machine's total),
    utilization, clock and temperature averaged across devices.
    """
    if samples is None or samples.empty:
        return {}
    window = _in_window(samples, start, end)
    out: dict = {}
    for source, rows in window.groupby(window["source"].fillna("unknown"), sort=True):
        per_tick = rows.groupby("t")
        stats = {
            "util_pct": per_tick["util_pct"].mean().mean(),
            "mem_used_bytes": per_tick["mem_used_bytes"].sum(min_count=1).mean(),
            "mem_total_bytes": per_tick["mem_total_bytes"].sum(min_count=1).mean(),
            "sm_clock_mhz": per_tick["sm_clock_mhz"].mean().mean(),
            "temp_c": per_tick["temp_c"].mean().mean(),
            "power_w": per_tick["power_w"].sum(min_count=1).mean(),
        }
        entry = {key: _clean(value) for key, value in stats.items() if _clean(value) is not None}
        entry["samples"] = int(len(rows))
        out[str(source)] = entry
    return out


def energy_per_token_j(device: dict, duration_s: float | None, output_tokens: float) -> float | None:
    """Joules per output token: mean total power (all sources that report it) x window / tokens."""
    power = [entry["power_w"] for entry in device.values() if entry.get("power_w") is not None]
    if not power or not duration_s or output_tokens <= 0:
        return None
    return float(np.sum(power) * duration_s / output_tokens)
