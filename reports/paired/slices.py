"""Records of a compare run -> one row per slice (its arm's statistics) -> per-pair arrays.

A request belongs to the slice in which it was sent (its record's `slice`), whether it
finished inside the slice or while the slice drained. Records a switch cut off
(`switch == "excluded"`) and warm-up records never enter a statistic.

Per slice, over its `ok` records:
    ttft_s.p50/p90, tpot_s.p50/p90, e2e_s.p50/p90: numpy percentiles of the requests' values;
    ttfa_s.p50/p90: likewise, the first answer token (after a reasoning model's reasoning; TTFT's
        again where nothing reasons, so it is judged but never gated unless named);
    itl_s.p50/p90: over every gap of those requests, pooled;
    output_tokens_per_s: their output tokens / (last finish - slice start);
    cpu_s_per_token: the server process tree's CPU seconds in the slice / those output tokens
        (only where the compare driver could read the server's /proc, i.e. not for a --url arm).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

LATENCY_METRICS = ("ttft_s", "tpot_s", "itl_s", "e2e_s", "ttfa_s")
QUANTILES = {"p50": 50.0, "p90": 90.0}
RATE_METRICS = ("output_tokens_per_s",)
COST_METRICS = ("cpu_s_per_token",)
METRIC_KEYS = tuple(f"{m}.{q}" for m in LATENCY_METRICS for q in QUANTILES) + RATE_METRICS + COST_METRICS


def higher_is_worse(metric_key: str) -> bool:
    return not metric_key.startswith(RATE_METRICS)


def _percentiles(values: np.ndarray) -> dict[str, float]:
    values = values[np.isfinite(values)]
    if not len(values):
        return {q: np.nan for q in QUANTILES}
    points = np.percentile(values, list(QUANTILES.values()))
    return dict(zip(QUANTILES, points.tolist()))


def slice_table(records: pd.DataFrame, itl_gaps: np.ndarray, itl_record: np.ndarray,
                slices: pd.DataFrame) -> pd.DataFrame:
    """One row per slice in `slices` (columns slice, pair, arm, t_start, cpu_s optional) with
    every METRIC_KEYS column and `requests` (ok records that entered the statistics)."""
    usable = (records["status"] == "ok") & (records["phase"] == "measure") & records["slice"].notna()
    if "switch" in records:
        usable &= records["switch"].astype(object).ne("excluded")
    rows = []
    positions = np.flatnonzero(usable.to_numpy())
    by_slice = records.iloc[positions].groupby("slice", observed=True).indices
    gap_order = np.argsort(itl_record, kind="stable")
    sorted_rows = itl_record[gap_order]
    for entry in slices.itertuples(index=False):
        row = {"slice": int(entry.slice), "pair": int(entry.pair), "arm": entry.arm}
        local = by_slice.get(float(entry.slice), by_slice.get(int(entry.slice)))
        members = positions[local] if local is not None else np.array([], dtype=np.int64)
        chosen = records.iloc[members]
        row["requests"] = len(members)
        for metric in ("ttft_s", "tpot_s", "e2e_s", "ttfa_s"):
            values = chosen[metric].to_numpy(dtype=np.float64) if metric in chosen else np.array([])
            for q, value in _percentiles(values).items():
                row[f"{metric}.{q}"] = value
        lo = np.searchsorted(sorted_rows, members, side="left")
        hi = np.searchsorted(sorted_rows, members, side="right")
        gaps = np.concatenate([itl_gaps[gap_order[a:b]] for a, b in zip(lo, hi)]) if len(members) else np.array([])
        for q, value in _percentiles(gaps).items():
            row[f"itl_s.{q}"] = value
        tokens = float(chosen["output_tokens"].fillna(0).sum())
        span = float((chosen["t_start"] + chosen["e2e_s"]).max() - entry.t_start) if len(members) else np.nan
        row["output_tokens_per_s"] = tokens / span if tokens and span > 0 else np.nan
        cpu = getattr(entry, "cpu_s", np.nan)
        row["cpu_s_per_token"] = float(cpu) / tokens if tokens and cpu is not None and np.isfinite(cpu) else np.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=["slice", "pair", "arm", "requests", *METRIC_KEYS])


def pair_arrays(table: pd.DataFrame, metric_key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pair ids, arm A values, arm B values) over the pairs that have both slices."""
    wide = table.pivot_table(index="pair", columns="arm", values=metric_key, aggfunc="first", dropna=False)
    for arm in ("a", "b"):
        if arm not in wide:
            wide[arm] = np.nan
    wide = wide.dropna(how="all")
    return wide.index.to_numpy(), wide["a"].to_numpy(dtype=np.float64), wide["b"].to_numpy(dtype=np.float64)
