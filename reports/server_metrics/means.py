"""summary.json's per-level `server` section: the engine's gauges, counters and histogram means
over the level's window, whatever engine it is (the fields of servecap.contract.server_metrics).

    {"engine": "vllm", "requests_running_mean", "requests_running_max", "requests_waiting_mean",
     "kv_usage_mean" (fraction), "kv_blocks_used_mean", "kv_blocks_total", "kv_block_bytes",
     "preemptions", "prefix_cache_hit_rate", "generation_tokens_per_s", "tokens_per_step_mean",
     "batch_size_mean", "step_time_mean_s", "scrapes"}

Only what the engine exports appears. Gauges: mean (and max) over the scrapes in [start, end].
Counters and histogram means: the change between the first scrape at or after `start` and the
last at or before `end` (histogram mean = delta(_sum) / delta(_count)), so everything counted
happened inside [start, end], never before or after it.
"""

from __future__ import annotations

from reports.server_metrics.series import ServerSeries
from servecap.contract.server_metrics import Metric, metric_for

# field -> summary key of its window mean (gauges)
GAUGE_MEANS = {"requests_running": "requests_running_mean", "requests_waiting": "requests_waiting_mean",
               "kv_usage": "kv_usage_mean", "kv_blocks_used": "kv_blocks_used_mean",
               "kv_blocks_total": "kv_blocks_total", "kv_block_bytes": "kv_block_bytes"}
FRACTION_FIELDS = {"kv_usage"}   # averaged, not summed, over label sets
# field -> summary key of its window mean (histograms)
HISTOGRAM_MEANS = {"tokens_per_step": "tokens_per_step_mean", "batch_size": "batch_size_mean",
                   "step_time": "step_time_mean_s"}


class Window:
    """One level's window on the series: the first scrape in it opens it, the last closes it
    (both None when fewer than two scrapes fall inside)."""

    def __init__(self, series: ServerSeries, start: float, end: float) -> None:
        self.series, self.start, self.end = series, start, end
        self.opened = series.first_scrape_at_or_after(start)
        self.closed = series.last_scrape_at_or_before(end)
        if self.opened is None or self.closed is None or self.closed <= self.opened:
            self.opened = self.closed = None

    def delta(self, metric: Metric) -> float | None:
        """A counter's (or a histogram _sum/_count sample's) change over the window."""
        if self.closed is None or metric.name not in self.series.samples:
            return None
        return self.series.value_at(metric, self.closed) - self.series.value_at(metric, self.opened)

    def histogram_mean(self, metric: Metric) -> tuple[float | None, float]:
        """(mean of the observations in the window, how many there were)."""
        total = self.delta(Metric(metric.name + "_sum", "counter"))
        count = self.delta(Metric(metric.name + "_count", "counter"))
        if total is None or not count or count <= 0:
            return None, count or 0.0
        return total / count, count


def server_means(series: ServerSeries, start: float, end: float) -> dict:
    """The level's `server` section ({} when nothing was scraped)."""
    if not series.scrape_times.size:
        return {}
    engine = series.engine
    out: dict = {"engine": engine}
    scrapes = series.scrapes_in(start, end)
    for field, key in GAUGE_MEANS.items():
        metric = metric_for(field, engine)
        if not series.has(metric) or not scrapes.size:
            continue
        values = [series.value_at(metric, t, mean=field in FRACTION_FIELDS) for t in scrapes]
        out[key] = sum(values) / len(values)
        if field == "requests_running":
            out["requests_running_max"] = max(values)
    if "kv_usage_mean" not in out and out.get("kv_blocks_used_mean") is not None and out.get("kv_blocks_total"):
        out["kv_usage_mean"] = out["kv_blocks_used_mean"] / out["kv_blocks_total"]
    window = Window(series, start, end)
    for field, key in HISTOGRAM_MEANS.items():
        metric = metric_for(field, engine)
        if series.has(metric):
            mean, _ = window.histogram_mean(metric)
            if mean is not None:
                out[key] = mean
    preemptions = _delta(window, "preemptions")
    if preemptions is not None:
        out["preemptions"] = preemptions
    hits, queries = _delta(window, "prefix_cache_hits"), _delta(window, "prefix_cache_queries")
    if hits is not None and queries:
        out["prefix_cache_hit_rate"] = hits / queries
    tokens = _delta(window, "generation_tokens")
    if tokens is not None:
        out["generation_tokens_per_s"] = tokens / (window.closed - window.opened)
    out["scrapes"] = int(scrapes.size)
    return out


def _delta(window: Window, field: str) -> float | None:
    metric = metric_for(field, window.series.engine)
    return window.delta(metric) if metric is not None else None
