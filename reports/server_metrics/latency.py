"""summary.json's per-level `server_latency`: the server's own latency percentiles over the level's window.

    {"ttft_s": ServerHistogram(count=812, mean=.., source="vllm:time_to_first_token_seconds", p50=..,
                               p50_bucket=(lo, hi), p90=.., p90_bucket=.., p99=.., p99_bucket=..),
     "queue_s": ..., "prefill_s": ..., "decode_s": ..., "inference_s": ..., "e2e_s": ..., ...}

Each histogram's buckets are read as of the first scrape at or after the window's start and the
last at or before its end; their difference counts what the server observed in between (a TTFT
when the first token came, the other phases when the request finished),
and its quantiles are interpolated inside a bucket as Prometheus' histogram_quantile does
(reports.server_metrics.histogram). Caveat: a percentile is only known to lie in its bucket
(`pXX_bucket`); with vLLM's coarse request-time buckets (0.3 s, 0.5 s, ...) a short queue time
cannot be told apart from zero. The mean (from _sum and _count) has no such limit.

`server_latency(frame, spans)` is the pure entry point for any caller (frame = server_metrics.csv; spans:
[(start, end), ...], one per round of a level measured in rounds, else one; their buckets are summed).
The summary starts a level's window once its warm-up requests have all finished
(`observation_start`), so the server's side holds (nearly) the client's measured requests only.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from reports.server_metrics.histogram import histogram_quantile
from reports.server_metrics.means import Span, Window
from reports.server_metrics.series import ServerSeries
from contract.level_result import ServerHistogram
from contract.server_metrics import LATENCY_FIELDS, Metric, metric_for

QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def server_latency(metrics: pd.DataFrame | ServerSeries | None, spans: Sequence[Span]) -> dict[str, ServerHistogram]:
    """{field: ServerHistogram} for every latency histogram the engine exports with observations in
    the spans [(start, end), ...]; `metrics` is server_metrics.csv as a frame, or a ServerSeries built from one."""
    series = metrics if isinstance(metrics, ServerSeries) else ServerSeries.from_frame(metrics)
    window = Window(series, spans)
    out = {}
    for field in LATENCY_FIELDS:
        metric = metric_for(field, series.engine)
        if metric is None or not series.has(metric):
            continue
        entry = histogram_window(window, metric)
        if entry is not None:
            out[field] = entry
    return out


def observation_start(start: float, warmup_ends: "np.ndarray") -> float:
    """When the server's view of a level may start: at its first measured send, or once the last of
    its warm-up requests finished, whichever is later (their first tokens and ends would count)."""
    return max([start, *warmup_ends.tolist()])


def histogram_window(window: Window, metric: Metric) -> ServerHistogram | None:
    """Count, mean and bucket-interpolated percentiles of one histogram's observations in the window."""
    found = window.bucket_counts(metric)
    if found is None:
        return None
    bounds, counts = found
    mean, count = window.histogram_mean(metric)
    if count <= 0:
        return None
    quantiles = {}
    for key, q in QUANTILES.items():
        found = histogram_quantile(q, bounds, counts)
        quantiles[key] = found.value if found else None
        quantiles[f"{key}_bucket"] = tuple(found.bucket) if found else None
    return ServerHistogram(count=int(round(count)), mean=mean, source=metric.name, **quantiles)
