"""Each core's speed over a level's windows, from the canary's record: the run's own speed clock.

    window_speeds(canary, spans, source=None) -> {series: (s_1, ..., s_w)}     per span, every series
    level_speed(canary, spans, series, source=None) -> s | None                one series, spans pooled
    machine_speed(canary, spans, cores, source=None) -> s | None               the cores' speed, all units
    steal_by_core(canary, spans, source=None) -> {core: share}                 what the host took, per core
    stolen_cores(shares) -> {core: share}; stolen_text(shares) -> "22% of core 0" | None   over HOST_STEAL_WARN

A series is one core, unit and clock: "core1 numpy cpu" (contract.canary's columns), or
one core's steal share: "core1 steal" (the share of its time the hypervisor took).
s_k = median time of the unit inside span k / median time of the same unit over the whole record
(of `source`, when given): 1.2 = that core ran the same fixed work 20% slower than the run's usual
during span k. A median, not a mean, because a unit that the scheduler interrupted mid-way reads
a cold cache afterwards and pays for it once.

Pure: a DataFrame of canary.csv rows in, numbers out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from contract.canary import CANARY_UNITS, STEAL_UNIT
from contract.level_windows import inside

HOST_STEAL_WARN = 0.10   # a core the host took more of than this during a level is worth a warning (as
                         # much as the stability tolerance lets a throughput move)
MIN_TICKS = 3        # fewer ticks of a series inside a span: no speed for it (one tick says little)
CLOCKS = {"cpu": "cpu_s", "wall": "wall_s"}
INTERVAL_SLACK_S = 0.5   # a steal row covers the tick before it: the one just after a span still covers it


def series_name(core, unit: str, clock: str) -> str:
    return f"core{core} {unit} {clock}"


def window_speeds(canary: pd.DataFrame | None, spans: Sequence[tuple[float, float]],
                  source: str | None = None) -> dict[str, tuple[float, ...] | None]:
    """{series: per span its speed} (None for a series with fewer than MIN_TICKS in some span)."""
    if canary is None or canary.empty or not spans:
        return {}
    rows = canary if source is None else canary[canary["source"].astype(str) == str(source)]
    out: dict[str, tuple[float, ...] | None] = {}
    steal = rows["unit"].astype(str) == STEAL_UNIT
    for core, frame in rows[steal].groupby("core", sort=True):
        shares = [steal_share(frame, [span]) for span in spans]
        out[f"core{core} steal"] = None if None in shares else tuple(shares)
    for (core, unit), frame in rows[~steal].groupby(["core", "unit"], sort=True):
        t = frame["t"].to_numpy(dtype=float)
        for clock, column in CLOCKS.items():
            values = frame[column].to_numpy(dtype=float)
            usual = float(np.median(values)) if len(values) else 0.0
            speeds = []
            for span in spans:
                mine = values[inside(t, [span])]
                speeds.append(float(np.median(mine)) / usual if len(mine) >= MIN_TICKS and usual > 0 else None)
            out[series_name(core, unit, clock)] = None if None in speeds else tuple(speeds)
    return out


def steal_share(rows: pd.DataFrame, spans: Sequence[tuple[float, float]]) -> float | None:
    """The share of a core's time the hypervisor took during `spans`, pooled, from its steal rows (each
    covers the interval up to its tick): their stolen over their accounted seconds; None without any."""
    t = rows["t"].to_numpy(dtype=float)
    mine = np.zeros(len(rows), dtype=bool)
    for start, end in spans:
        mine |= (t > start) & (t <= end + INTERVAL_SLACK_S)
    accounted = float(rows["wall_s"].to_numpy(dtype=float)[mine].sum())
    return float(rows["cpu_s"].to_numpy(dtype=float)[mine].sum()) / accounted if accounted > 0 else None


def level_speed(canary: pd.DataFrame | None, spans: Sequence[tuple[float, float]], series: str,
                source: str | None = None) -> float | None:
    """One series' speed over all of a level's spans together (its rounds pooled)."""
    if canary is None or canary.empty or not spans:
        return None
    core, unit, clock = series.split()
    rows = canary if source is None else canary[canary["source"].astype(str) == str(source)]
    rows = rows[(rows["core"].astype(str) == core.removeprefix("core")) & (rows["unit"].astype(str) == unit)]
    values = rows[CLOCKS[clock]].to_numpy(dtype=float)
    mine = values[inside(rows["t"].to_numpy(dtype=float), list(spans))]
    usual = float(np.median(values)) if len(values) else 0.0
    return float(np.median(mine)) / usual if len(mine) >= MIN_TICKS and usual > 0 else None


def machine_speed(canary: pd.DataFrame | None, spans: Sequence[tuple[float, float]], cores: Sequence[int],
                  source: str | None = None, units: Sequence[str] = CANARY_UNITS) -> float | None:
    """How much longer than the run's usual the given cores took for the same work over `spans`
    (a level's windows): per core, the geometric mean of its units' CPU-time speeds, stretched by
    1 / (1 - its steal share); then the geometric mean over the cores. None where a core or unit
    has too few ticks (an older run without canary.csv: None)."""
    if canary is None or canary.empty or not spans or not cores:
        return None
    rows = canary if source is None else canary[canary["source"].astype(str) == str(source)]
    logs = []
    for core in cores:
        mine = rows[rows["core"].astype(str) == str(core)]
        speeds = [level_speed(mine, spans, series_name(core, unit, "cpu")) for unit in units]
        if not speeds or None in speeds:
            return None
        share = steal_share(mine[mine["unit"].astype(str) == STEAL_UNIT], spans) or 0.0
        logs.append(float(np.mean(np.log(speeds))) - float(np.log1p(-min(share, 0.95))))
    return float(np.exp(np.mean(logs)))


def steal_by_core(canary: pd.DataFrame | None, spans: Sequence[tuple[float, float]],
                  source: str | None = None) -> dict[str, float]:
    """{core: the share of its time the host took over all of `spans`} from the canary's steal rows
    ({} without them: no canary, or no /proc/stat)."""
    if canary is None or canary.empty or not spans:
        return {}
    rows = canary if source is None else canary[canary["source"].astype(str) == str(source)]
    rows = rows[rows["unit"].astype(str) == STEAL_UNIT]
    shares = {str(core): steal_share(frame, spans) for core, frame in rows.groupby("core", sort=True)}
    return {core: share for core, share in shares.items() if share is not None}


def stolen_cores(shares: dict[str, float]) -> dict[str, float]:
    """The cores of `steal_by_core`'s {core: share} the host took more than HOST_STEAL_WARN of."""
    return {core: share for core, share in shares.items() if share > HOST_STEAL_WARN}


def stolen_text(shares: dict[str, float]) -> str | None:
    """"22% of core 0, 8% of core 1" for the cores over HOST_STEAL_WARN; None when there are none."""
    stolen = stolen_cores(shares)
    return ", ".join(f"{share:.0%} of core {core}" for core, share in stolen.items()) if stolen else None
