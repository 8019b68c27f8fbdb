"""A level's server-side split of each request, from Triton's counters (`nv_inference_*`), beside the
client's latency over the same span.

Each counter is read at the last scrape at or before the level's window start and the first at or
after its end (summed over the model's label sets). Dividing each duration's delta by the successes'
delta gives the server's mean per request: queue, compute (input + infer + output) and the whole
request. The client's mean E2E is taken over the requests that finished between those two scrapes,
so both sides cover the same requests; what the client saw beyond the server's request duration is
the transport (both ends' HTTP or gRPC stacks, and the loopback).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from contract.server_metrics import SCRAPE_MARKER, TRITON_COUNTERS

US = 1e-6
MIN_MARGIN_S = 1.0    # scrapes this near a window (or MARGIN_SCRAPES intervals) may bracket it
MARGIN_SCRAPES = 3


def triton_deltas(metrics: pd.DataFrame | None, model: str | None, start: float, end: float
                  ) -> tuple[dict[str, float], float, float] | None:
    """({counter: delta}, first scrape time, last scrape time) over [start, end]; None when the
    server exposes no Triton counters (or no two scrapes bracket the window).

    The scraper writes a counter only when it changed, so each counter holds its last value at every
    scrape (forward-filled), 0 before its first. Only scrapes within a few intervals of the window
    bracket it: a sweep's servers share the file, one after another, each restarting its counters,
    and a level's warm-up has written this server's values by the window's first scrape."""
    if metrics is None or metrics.empty:
        return None
    scrapes = np.sort(metrics.loc[metrics["name"] == SCRAPE_MARKER, "t"].to_numpy(dtype=float))
    rows = metrics[metrics["name"].isin(TRITON_COUNTERS)]
    if model is not None:
        rows = rows[rows["labels"].astype(str).str.contains(f'model="{model}"', regex=False)]
    if rows.empty or scrapes.size < 2:
        return None
    margin = max(MIN_MARGIN_S, MARGIN_SCRAPES * float(np.median(np.diff(scrapes))))
    near = scrapes[(scrapes >= start - margin) & (scrapes <= end + margin)]
    # the scrapes just outside the window, else the outermost inside it (the sweep stops scraping as a
    # level ends); the client's requests are then those that finished between the same two scrapes
    before, after = near[near <= start], near[near >= end]
    inside = near[(near > start) & (near < end)]
    t0 = float(before[-1]) if before.size else (float(inside[0]) if inside.size else None)
    t1 = float(after[0]) if after.size else (float(inside[-1]) if inside.size else None)
    if t0 is None or t1 is None or t1 <= t0:
        return None
    totals = rows.groupby(["t", "name"])["value"].sum().unstack("name")
    totals = totals.reindex(np.union1d(totals.index.to_numpy(dtype=float), near)).sort_index().ffill().fillna(0.0)
    delta = totals.loc[t1] - totals.loc[t0]
    return {name: float(delta.get(name, 0.0)) for name in TRITON_COUNTERS}, t0, t1


def level_split(metrics: pd.DataFrame | None, model: str | None, window: tuple[float, float],
                t_end: np.ndarray, e2e_s: np.ndarray) -> dict | None:
    """The server's mean queue, compute and request time per request (seconds), the mean rows per batch,
    and the client's mean E2E over the same requests; None without Triton counters or requests."""
    found = triton_deltas(metrics, model, *window)
    if found is None:
        return None
    delta, t0, t1 = found
    served = delta["nv_inference_request_success"]
    if served <= 0:
        return None
    inside = (t_end > t0) & (t_end <= t1)
    compute = sum(delta[f"nv_inference_compute_{part}_duration_us"] for part in ("input", "infer", "output"))
    split = {
        "server_requests": served,
        "client_requests": int(inside.sum()),
        "queue_s": delta["nv_inference_queue_duration_us"] * US / served,
        "compute_s": compute * US / served,
        "compute_infer_s": delta["nv_inference_compute_infer_duration_us"] * US / served,
        "server_request_s": delta["nv_inference_request_duration_us"] * US / served,
        "batch_rows": (delta["nv_inference_count"] / delta["nv_inference_exec_count"]
                       if delta["nv_inference_exec_count"] > 0 else None),
        "batches": delta["nv_inference_exec_count"],
        "client_e2e_s": float(np.mean(e2e_s[inside])) if inside.any() else None,
    }
    split["in_server_other_s"] = split["server_request_s"] - split["queue_s"] - split["compute_s"]
    split["transport_s"] = (split["client_e2e_s"] - split["server_request_s"]
                            if split["client_e2e_s"] is not None else None)
    return split
