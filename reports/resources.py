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
    return frame[(frame["t"] >= start) & (frame["t"] <= end)]  # samples.csv is small: a scan is fine


def metric_series(metrics: pd.DataFrame | None) -> dict[str, pd.Series]:
    """{metric name: value per scrape time (summed over label sets), sorted by t}; built once per run."""
    if metrics is None or metrics.empty:
        return {}
    wanted = set(SERVER_GAUGES) | {stem + suffix for stem in SERVER_HISTOGRAMS for suffix in ("_sum", "_count")}
    rows = metrics[metrics["name"].isin(wanted)]
    summed = rows.groupby(["name", "t"], sort=True)["value"].sum()
    return {str(name): summed.xs(name, level="name") for name in summed.index.get_level_values("name").unique()}


def server_means(series: dict[str, pd.Series], start: float, end: float) -> dict:
    """Means of the servecap gauges, mean batch size and mean engine step time over [start, end].

    `series` comes from `metric_series`. Gauges are averaged over the scrapes in
    the window. A histogram's mean (batch size, step time) = delta(_sum) / delta(_count)
    between the last scrape at or before `start` and the last at or before `end`.
    """
    if not series:
        return {}
    out: dict = {}
    scrapes = 0
    for name, key in SERVER_GAUGES.items():
        values = _window(series.get(name), start, end)
        if values is not None and len(values):
            out[key] = _clean(values.mean())
            scrapes = max(scrapes, len(values))
            if name == "servecap_requests_running":
                out["requests_running_max"] = _clean(values.max())
    if out.get("kv_blocks_used_mean") is not None and out.get("kv_blocks_total"):
        out["kv_usage_mean"] = out["kv_blocks_used_mean"] / out["kv_blocks_total"]
    for stem, key in SERVER_HISTOGRAMS.items():
        mean = _histogram_mean(series.get(stem + "_sum"), series.get(stem + "_count"), start, end)
        if mean is not None:
            out[key] = mean
    out["scrapes"] = scrapes
    return out


def _window(values: pd.Series | None, start: float, end: float) -> pd.Series | None:
    if values is None:
        return None
    index = values.index.to_numpy()
    return values.iloc[np.searchsorted(index, start, "left"):np.searchsorted(index, end, "right")]


def _histogram_mean(sums: pd.Series | None, counts: pd.Series | None, start: float, end: float) -> float | None:
    if sums is None or counts is None:
        return None
    deltas = []
    for values in (sums, counts):
        index = values.index.to_numpy()
        at_start = np.searchsorted(index, start, "right") - 1   # last scrape at or before start
        at_end = np.searchsorted(index, end, "right") - 1
        if at_end < 0:
            return None
        deltas.append(values.iloc[at_end] - (values.iloc[at_start] if at_start >= 0 else 0.0))
    return float(deltas[0] / deltas[1]) if deltas[1] > 0 else None


def _sample_group(samples: pd.DataFrame) -> pd.Series:
    """GPUs pool under their source (`nvml`); host rows split by device: `host` (whole machine)
    and `host pid:123` (the server process), which must not be summed together."""
    source = samples["source"].fillna("unknown").astype(str)
    device = samples["device"].fillna("").astype(str)
    return source.where((source == "nvml") | (device == ""), source + " " + device)


def device_means(samples: pd.DataFrame | None, start: float, end: float) -> dict:
    """Per sample group (`nvml`, `host`, `host pid:N`): means of util, memory, clock, temperature, power.

    Shape: {"nvml": {"util_pct": .., "mem_used_bytes": .., ..., "power_w": .., "samples": n}}.
    Memory and power are summed across devices per tick (the machine's total),
    utilization, clock and temperature averaged across devices.
    """
    if samples is None or samples.empty:
        return {}
    window = _in_window(samples, start, end)
    out: dict = {}
    for source, rows in window.groupby(_sample_group(window), sort=True):
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
