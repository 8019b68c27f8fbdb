"""server_metrics.csv rebuilt: the engine it came from, its scrape times, and any sample "as of" a time.

The file keeps a row only when a value changed (contract.server_metrics), so a
series' value at time t is its last row at or before t (0 before its first row: a counter or
histogram not yet exposed has counted nothing). Values are summed over label sets (e.g.
vLLM's `engine="0"`, `engine="1"`), except fractions, which are averaged.

    series = ServerSeries.from_frame(run_data.server_metrics)
    series.engine                                  # "vllm"
    series.value_at(metric, t)                     # a gauge or counter
    series.buckets_at(metric, t)                   # (upper bounds [B], cumulative counts [B])
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from contract.server_metrics import HISTOGRAM, SCRAPE_MARKER, Metric, detect_engine, kept_sample_names

_LE = re.compile(r'(?:^|,)le="([^"]*)"')


@dataclass(frozen=True)
class _Series:
    times: np.ndarray    # [N] sorted scrape times at which the value changed
    values: np.ndarray   # [N]

    def at(self, t: float) -> float:
        index = int(np.searchsorted(self.times, t, side="right")) - 1
        return float(self.values[index]) if index >= 0 else 0.0

    def at_each(self, times: np.ndarray) -> np.ndarray:
        """`at` of each of `times` [T] -> [T]."""
        index = np.searchsorted(self.times, times, side="right") - 1
        return np.where(index >= 0, self.values[np.maximum(index, 0)] if len(self.values) else 0.0, 0.0)


@dataclass(frozen=True)
class ServerSeries:
    """Attributes:
        engine: the engine told by the names (see `detect_engine`), None when no known one.
        scrape_times: [S] sorted times of the scrapes (marker rows; older files: the rows' own times).
        samples: {sample name: {labels: _Series}} for the names the mapping reads.
    """

    engine: str | None
    scrape_times: np.ndarray
    samples: dict[str, dict[str, _Series]] = field(default_factory=dict)

    @classmethod
    def from_frame(cls, metrics: pd.DataFrame | None) -> "ServerSeries":
        if metrics is None or metrics.empty:
            return cls(None, np.empty(0))
        names = metrics["name"].astype(str)
        markers = names == SCRAPE_MARKER
        scrape_times = np.sort(metrics.loc[markers, "t"].to_numpy(dtype=float)) if markers.any() \
            else np.unique(metrics["t"].to_numpy(dtype=float))
        engine = detect_engine(names.unique())
        rows = metrics[names.isin(kept_sample_names())].sort_values("t", kind="stable")
        labels = rows["labels"].where(rows["labels"].notna(), "").astype(str)
        samples: dict[str, dict[str, _Series]] = {}
        for (name, label), group in rows.groupby([rows["name"].astype(str), labels], sort=False):
            samples.setdefault(name, {})[label] = _Series(group["t"].to_numpy(dtype=float),
                                                          group["value"].to_numpy(dtype=float))
        return cls(engine, scrape_times, samples)

    def has(self, metric: Metric | None) -> bool:
        return metric is not None and any(name in self.samples for name in metric.sample_names())

    def value_at(self, metric: Metric, t: float, *, mean: bool = False) -> float | None:
        """Sum (or `mean`) over label sets of the sample's value as of `t`; None when never scraped."""
        per_label = self.samples.get(metric.name)
        if not per_label:
            return None
        values = [series.at(t) for series in per_label.values()]
        return (float(np.mean(values)) if mean else float(np.sum(values))) * metric.scale

    def values_at(self, metric: Metric, times: np.ndarray, *, mean: bool = False) -> np.ndarray | None:
        """`value_at` of each of `times` [T] -> [T], float for float (a level's gauges are read at every
        scrape in its windows: thousands in a long run); None when never scraped."""
        per_label = self.samples.get(metric.name)
        if not per_label:
            return None
        # [T, L]: each time's label values reduced along the last axis, in order, as value_at's np.sum/np.mean
        values = np.stack([series.at_each(times) for series in per_label.values()], axis=1)
        return (values.mean(axis=1) if mean else values.sum(axis=1)) * metric.scale

    def scrapes_in(self, start: float, end: float) -> np.ndarray:
        return self.scrape_times[(self.scrape_times >= start) & (self.scrape_times <= end)]

    def first_scrape_at_or_after(self, t: float) -> float | None:
        index = int(np.searchsorted(self.scrape_times, t, side="left"))
        return float(self.scrape_times[index]) if index < len(self.scrape_times) else None

    def last_scrape_at_or_before(self, t: float) -> float | None:
        index = int(np.searchsorted(self.scrape_times, t, side="right")) - 1
        return float(self.scrape_times[index]) if index >= 0 else None

    def buckets_at(self, metric: Metric, t: float) -> tuple[np.ndarray, np.ndarray] | None:
        """A histogram's (upper bounds [B], cumulative counts [B]) as of `t`, summed over its other
        labels; None when its buckets were never scraped."""
        if metric.kind != HISTOGRAM:
            raise ValueError(f"{metric.name} is a {metric.kind}, not a histogram")
        per_label = self.samples.get(metric.name + "_bucket")
        if not per_label:
            return None
        by_bound: dict[float, float] = {}
        for label, series in per_label.items():
            match = _LE.search(label)
            if match is None:
                continue
            bound = float(match.group(1))   # "+Inf" -> inf
            by_bound[bound] = by_bound.get(bound, 0.0) + series.at(t)
        if not by_bound:
            return None
        bounds = np.array(sorted(by_bound))
        return bounds, np.array([by_bound[b] for b in bounds])
