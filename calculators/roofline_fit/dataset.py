"""The calibration dataset: published, measured engine performance, transcribed with its source.

``published_points.csv`` holds one row per published number, as printed (``value`` in ``unit``), with
its setup: engine and version, model, GPU, weight and KV-cache dtype, TP, batch or concurrency, input
and output lengths. ``sources.json`` says where each source is (repository + path + ref, or page) and
how it measured. ``setup`` is ``complete`` or ``partial: <what is not stated, and what is assumed>``;
only complete points are fitted, partial ones are reported apart.

What a point measures (``metric``) and how its number becomes seconds (``measured_s``):
    decode_step   one decode step at batch B, mean context = input + output / 2
                  (an ITL/TPOT, a per-token latency, or 1 / tokens-per-second-per-user at batch 1)
    ttft          one prefill of the input at batch 1 (time to first token)
    static_batch  a batch of B requests started together and run to the end: total time =
                  B x output / throughput (out tok/s), B x output / (throughput x tp) (out tok/s/gpu),
                  B x (input + output) / throughput (total tok/s); predicted as one prefill of B prompts
                  plus (output - 1) decode steps at batch B and mean context input + output / 2
    loaded_itl    mean inter-token latency of a closed loop at concurrency C: predicted as a decode step
                  at batch C plus the C - 1 other requests' prefills spread over this one's output tokens
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

METRICS = ("decode_step", "ttft", "static_batch", "loaded_itl")
UNITS = ("ms", "s", "tok/s/user", "out_tok/s", "out_tok/s/gpu", "total_tok/s")
_COLUMNS = ("id", "source", "engine", "engine_version", "model", "gpu", "dtype", "kv_dtype", "tp", "metric",
            "batch", "input_tokens", "output_tokens", "value", "unit", "setup", "note")


@dataclass(frozen=True)
class Source:
    """A publication the points come from."""

    id: str
    title: str
    engine: str
    engine_version: str
    repository: str | None = None
    path: str | None = None
    ref: str | None = None
    url: str | None = None
    note: str = ""

    @property
    def where(self) -> str:
        if self.repository:
            return f"{self.repository}:{self.path} ({self.ref})"
        return self.url or "?"


@dataclass(frozen=True)
class PublishedPoint:
    """One published measurement (module docstring for the metrics)."""

    id: str
    source: str
    engine: str
    engine_version: str
    model: str
    gpu: str
    dtype: str
    kv_dtype: str
    tp: int
    metric: str
    batch: int
    input_tokens: int
    output_tokens: int
    value: float
    unit: str
    setup: str
    note: str

    @property
    def complete(self) -> bool:
        return self.setup == "complete"

    @property
    def mean_context(self) -> float:
        return self.input_tokens + self.output_tokens / 2

    @property
    def measured_s(self) -> float:
        """The published number in seconds (conversions in the module docstring)."""
        v, b, o = self.value, self.batch, self.output_tokens
        if self.unit == "ms":
            return v / 1e3
        if self.unit == "s":
            return v
        if self.unit == "tok/s/user":
            return 1 / v
        if self.unit == "out_tok/s":
            return b * o / v
        if self.unit == "out_tok/s/gpu":
            return b * o / (v * self.tp)
        return b * (self.input_tokens + o) / v   # total_tok/s


def _point(row: dict, line: int) -> PublishedPoint:
    where = f"published_points.csv line {line}"
    missing = [c for c in _COLUMNS if c not in row or row[c] is None]
    if missing:
        raise ValueError(f"{where}: missing column(s) {', '.join(missing)}")
    try:
        point = PublishedPoint(**{**row, **{k: int(row[k]) for k in ("tp", "batch", "input_tokens", "output_tokens")},
                                  "value": float(row["value"])})
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    if point.metric not in METRICS or point.unit not in UNITS:
        raise ValueError(f"{where}: metric {point.metric!r} / unit {point.unit!r} not one of {METRICS} / {UNITS}")
    if not point.value > 0 or point.tp < 1 or point.batch < 1 or point.input_tokens < 1 or point.output_tokens < 1:
        raise ValueError(f"{where}: value, tp, batch and lengths must be positive")
    if not (point.complete or point.setup.startswith("partial: ")):
        raise ValueError(f"{where}: setup must be 'complete' or 'partial: <what is missing>'")
    return point


@lru_cache(maxsize=1)
def load_sources() -> dict[str, Source]:
    raw = json.loads(resources.files("calculators").joinpath("roofline_fit/sources.json").read_text())
    return {key: Source(id=key, **fields) for key, fields in raw.items() if not key.startswith("_")}


@lru_cache(maxsize=1)
def load_points() -> tuple[PublishedPoint, ...]:
    """Every published point; ValueError names the line of a malformed row or an unknown source."""
    text = resources.files("calculators").joinpath("roofline_fit/published_points.csv").read_text()
    points = tuple(_point(row, i + 2) for i, row in enumerate(csv.DictReader(text.splitlines())))
    sources = load_sources()
    unknown = sorted({p.source for p in points} - set(sources))
    if unknown:
        raise ValueError(f"published_points.csv names source(s) missing from sources.json: {', '.join(unknown)}")
    ids = [p.id for p in points]
    if len(ids) != len(set(ids)):
        raise ValueError("published_points.csv has duplicate ids")
    return points
