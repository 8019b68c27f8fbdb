"""Device means over one level's time window. Pure: frames in, dicts out.

A level's window is the span of its measure-phase records (first send to last
byte); samples.csv has one row per device (or the host) per sampling tick. The server's
own metrics (server_metrics.csv) are read by reports.server_metrics.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from contract.level_windows import inside

DEVICE_COLUMNS = ("util_pct", "mem_used_bytes", "mem_total_bytes", "sm_clock_mhz", "temp_c")


def _clean(value: float) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _in_windows(frame: pd.DataFrame, spans) -> pd.DataFrame:
    return frame[inside(frame["t"].to_numpy(dtype=float), spans)]  # samples.csv is small: a scan is fine


def _sample_group(samples: pd.DataFrame) -> pd.Series:
    """GPUs pool under their source (`nvml`); host rows split by device: `host` (whole machine)
    and `host pid:123` (the server process), which must not be summed together."""
    source = samples["source"].astype("string").fillna("unknown").astype(str)
    device = samples["device"].astype("string").fillna("").astype(str)   # all-empty reads as float64
    return source.where((source == "nvml") | (device == ""), source + " " + device)


def device_means(samples: pd.DataFrame | None, spans) -> dict:
    """Per sample group (`nvml`, `host`, `host pid:N`): means of util, memory, clock, temperature, power,
    over the samples inside the level's windows (spans [(start, end), ...]: one, or one per round).

    Shape: {"nvml": {"util_pct": .., "mem_used_bytes": .., ..., "power_w": .., "samples": n}}.
    Memory and power are summed across devices per tick (the machine's total),
    utilization, clock and temperature averaged across devices.
    """
    if samples is None or samples.empty:
        return {}
    window = _in_windows(samples, spans)
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
