"""summary.json's per-level `server` section: the engine's gauges, counters and histogram means
over the level's window, whatever engine it is (the fields of contract.server_metrics).

    {"engine": "vllm", "requests_running_mean", "requests_running_max", "requests_waiting_mean",
     "kv_usage_mean" (fraction), "kv_blocks_used_mean", "kv_blocks_total", "kv_block_bytes",
     "preemptions", "prefix_cache_hit_rate", "generation_tokens_per_s", "tokens_per_step_mean",
     "spec_drafts_per_decode" (the share of decodes that proposed),
     "spec_acceptance_rate" (accepted / proposed tokens), "spec_mean_accepted_length" (1 + accepted per
     verification: the tokens a verification step yields),
     "batch_size_mean", "step_time_mean_s", "scrapes"}

Only what the engine exports appears. Gauges: mean (and max) over the scrapes in [start, end].
Counters and histogram means: the change between the first scrape at or after `start` and the
last at or before `end` (histogram mean = delta(_sum) / delta(_count)), so everything counted
happened inside [start, end], never before or after it. A level measured in rounds (sweep
--rounds) has several such spans (contract.level_windows): gauges over the scrapes
in any of them, counters and histograms summed over them, never over the other levels' time
between them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from reports.server_metrics.series import ServerSeries
from contract.server_metrics import Metric, metric_for

# field -> summary key of its window mean (gauges)
GAUGE_MEANS = {"requests_running": "requests_running_mean", "requests_waiting": "requests_waiting_mean",
               "kv_usage": "kv_usage_mean", "kv_blocks_used": "kv_blocks_used_mean",
               "kv_blocks_total": "kv_blocks_total", "kv_block_bytes": "kv_block_bytes"}
FRACTION_FIELDS = {"kv_usage"}   # averaged, not summed, over label sets
# field -> summary key of its window mean (histograms)
HISTOGRAM_MEANS = {"tokens_per_step": "tokens_per_step_mean", "batch_size": "batch_size_mean",
                   "step_time": "step_time_mean_s"}


Span = tuple[float, float]


class Window:
    """One level's windows on the series, one per span [start, end]: the first scrape in a span
    opens it, the last closes it (`parts`: the (opened, closed) scrape times of the spans with two
    scrapes or more; empty when none has)."""

    def __init__(self, series: ServerSeries, spans: Sequence[Span]) -> None:
        self.series, self.spans = series, list(spans)
        self.parts: list[tuple[float, float]] = []
        for start, end in self.spans:
            opened, closed = series.first_scrape_at_or_after(start), series.last_scrape_at_or_before(end)
            if opened is not None and closed is not None and closed > opened:
                self.parts.append((opened, closed))

    @property
    def seconds(self) -> float:
        """Scrape time covered: the sum of the parts' lengths."""
        return sum(closed - opened for opened, closed in self.parts)

    def delta(self, metric: Metric) -> float | None:
        """A counter's (or a histogram _sum/_count sample's) change over the windows."""
        if not self.parts or metric.name not in self.series.samples:
            return None
        return sum(self.series.value_at(metric, closed) - self.series.value_at(metric, opened)
                   for opened, closed in self.parts)

    def bucket_counts(self, metric: Metric) -> tuple[np.ndarray, np.ndarray] | None:
        """A histogram's (upper bounds [B], observations per cumulative bucket [B]) inside the windows."""
        total: dict[float, float] = {}
        for opened, closed in self.parts:
            end = self.series.buckets_at(metric, closed)
            if end is None:
                continue
            begin = self.series.buckets_at(metric, opened)
            before = dict(zip(*begin)) if begin is not None else {}
            for bound, count in zip(*end):
                total[bound] = total.get(bound, 0.0) + count - before.get(bound, 0.0)
        if not total:
            return None
        bounds = np.array(sorted(total))
        return bounds, np.array([total[b] for b in bounds])

    def scrapes(self) -> np.ndarray:
        """The scrape times inside any span."""
        found = [self.series.scrapes_in(start, end) for start, end in self.spans]
        return np.unique(np.concatenate(found)) if found else np.empty(0)

    def histogram_mean(self, metric: Metric) -> tuple[float | None, float]:
        """(mean of the observations in the window, how many there were)."""
        total = self.delta(Metric(metric.name + "_sum", "counter"))
        count = self.delta(Metric(metric.name + "_count", "counter"))
        if total is None or not count or count <= 0:
            return None, count or 0.0
        return total / count, count


def server_means(series: ServerSeries, spans: Sequence[Span]) -> dict:
    """The level's `server` section over its windows ({} when nothing was scraped)."""
    if not series.scrape_times.size:
        return {}
    engine = series.engine
    out: dict = {"engine": engine}
    window = Window(series, spans)
    scrapes = window.scrapes()
    for field, key in GAUGE_MEANS.items():
        metric = metric_for(field, engine)
        if not series.has(metric) or not scrapes.size:
            continue
        values = series.values_at(metric, scrapes, mean=field in FRACTION_FIELDS).tolist()
        out[key] = sum(values) / len(values)
        if field == "requests_running":
            out["requests_running_max"] = max(values)
    if "kv_usage_mean" not in out and out.get("kv_blocks_used_mean") is not None and out.get("kv_blocks_total"):
        out["kv_usage_mean"] = out["kv_blocks_used_mean"] / out["kv_blocks_total"]
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
    drafts, proposed = _delta(window, "spec_drafts"), _delta(window, "spec_draft_tokens")
    accepted = _delta(window, "spec_accepted_tokens")
    if drafts and proposed and accepted is not None:   # speculative decoding, as vLLM reports it
        out["spec_acceptance_rate"] = accepted / proposed
        out["spec_mean_accepted_length"] = 1 + accepted / drafts
    tokens = _delta(window, "generation_tokens")
    if tokens is not None:
        out["generation_tokens_per_s"] = tokens / window.seconds
    if drafts and tokens and accepted is not None and series.has(metric_for("ttft_s", engine)):
        # the share of decodes that proposed (prompt lookup finds no match in some): a decode yields one
        # token plus those it kept, and each request's first token comes from its prefill
        _, first_tokens = window.histogram_mean(metric_for("ttft_s", engine))
        decodes = tokens - accepted - first_tokens
        if decodes > 0:
            out["spec_drafts_per_decode"] = min(1.0, drafts / decodes)
    out["scrapes"] = int(scrapes.size)
    return out


def _delta(window: Window, field: str) -> float | None:
    metric = metric_for(field, window.series.engine)
    return window.delta(metric) if metric is not None else None
