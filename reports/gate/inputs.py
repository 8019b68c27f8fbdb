"""The gate's two sides: a run directory or a summary.json, with raw values when they exist.

Raw values (per-request latencies, pooled inter-token gaps, per-window throughput)
come from `reports.run_data` exactly as the report reads them, so the gate and the
report can never disagree on what a run measured.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reports.gate.stats import time_blocks
from reports.run_data import RunData, RunDirError, frame_windows, load_run
from reports.summary import LATENCY_METRICS
from contract.level_windows import inside
from contract.level_result import Interval, LevelResult
from contract.run_json import RunInfo
from contract.summary import Summary

THROUGHPUT_WINDOWS = 10  # a level's measurement window is cut in this many slices for throughput noise

# run.json fields that must match for two runs to be comparable; None (or an empty workload) = not recorded.
COMPARABLE_FIELDS = {
    "server.model": lambda run: run.server.model,
    "server.dtype": lambda run: run.server.dtype,
    "server.device": lambda run: run.server.device,
    "workload": lambda run: run.workload.to_dict() or None,
    "host.cpu_model": lambda run: run.host.cpu_model,
    "host.gpus": lambda run: run.host.gpus,
}


class GateInputError(ValueError):
    """The gate cannot use this input at all (exit 2)."""


@dataclass
class GateSide:
    """One side of the comparison.

    Attributes:
        label: the path the user gave.
        run: run.json, typed (read from inside summary.json as "run" when only that is given).
        levels: summary.json's levels (typed) by level id.
        data: the raw run, or None when only a summary.json is available.
    """

    label: str
    run: RunInfo
    levels: dict[str, LevelResult]
    data: RunData | None

    def latency_values(self, level: str, metric: str) -> tuple[np.ndarray, np.ndarray] | None:
        """Raw ok+measure values of `metric` at `level` (itl_s pools every gap) and each value's time block
        (its request's slice of the run in send order, see gate_stats.time_blocks); None without raw data."""
        if self.data is None:
            return None
        records = self.data.records
        mask = (self.data.measured_ok() & (records["level"] == level)).to_numpy()
        request_blocks = np.full(len(records), -1, dtype=np.int64)
        request_blocks[mask] = time_blocks(records.loc[mask, "t_start"].to_numpy(dtype=np.float64))
        if metric == "itl_s":
            gap_mask = mask[self.data.itl_record]
            return self.data.itl_gaps[gap_mask], request_blocks[self.data.itl_record[gap_mask]]
        return records.loc[mask, metric].to_numpy(dtype=np.float64), request_blocks[mask]

    def window_rates(self, level: str, metric: str) -> np.ndarray | None:
        """`metric` (output_tokens_per_s or request_rate_rps) in each of THROUGHPUT_WINDOWS slices of the level.

        Each ok request counts at its completion time (t_start + e2e_s); the span is the
        level's measurement window as the summary defines it (first send to last completion);
        a level measured in rounds gives one value per round instead.
        """
        if self.data is None:
            return None
        records = self.data.records
        frame = records[(records["level"] == level) & (records["phase"] == "measure")]
        if frame.empty:
            return None
        windows = frame_windows(frame)
        ok = frame[frame["status"] == "ok"]
        weights = ok["output_tokens"].to_numpy(dtype=np.float64) if metric == "output_tokens_per_s" else None
        done = ok["t_end"].to_numpy(dtype=np.float64)
        if len(windows) > 1:   # measured in rounds (sweep --rounds): one value per round
            values = []
            for start, end in windows:
                if end > start:
                    mask = inside(done, [(start, end)])
                    values.append((weights[mask].sum() if weights is not None else mask.sum()) / (end - start))
            return np.array(values) if len(values) > 1 else None
        (start, end), = windows
        if not end > start:
            return None
        counts, edges = np.histogram(done, bins=THROUGHPUT_WINDOWS, range=(start, end), weights=weights)
        return counts / np.diff(edges)


SUMMARY_RATES = {"output_tokens_per_s": lambda level: level.output_tokens_per_s,
                 "request_rate_rps": lambda level: level.request_rate_rps}


def summary_value(level: LevelResult | None, metric: str,
                  stat: str | None = None) -> tuple[float | None, Interval | None]:
    """A threshold's figure as a summary level has it, and its 95% interval where it has one: a latency's
    statistic (`ttft_s`, `p99`), or a rate (`output_tokens_per_s`; None for what a summary does not hold,
    such as compare's `cpu_s_per_token`, and for a level a side lacks)."""
    if level is None:
        return None, None
    if stat is None:
        read = SUMMARY_RATES.get(metric)
        return (read(level) if read else None), None
    distribution = level.metric(metric)
    return distribution.at(stat), distribution.ci95(stat)


def load_side(path: str | Path, summarize_run: Callable[[RunData], Summary]) -> GateSide:
    """Read a run directory (summarizing it with `summarize_run(RunData) -> Summary`) or a summary.json.

    A summary.json whose directory also holds requests.jsonl is read with its raw records.
    """
    path = Path(path)
    label = str(path)
    if path.is_file():
        try:
            document = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise GateInputError(f"{label}: not a readable summary.json ({exc})") from None
        if not isinstance(document, dict):
            raise GateInputError(f"{label}: summary.json is not a JSON object")
        if not isinstance(document.get("levels"), list):
            raise GateInputError(f"{label}: summary has no 'levels' list")
        data = load_run(path.parent) if (path.parent / "requests.jsonl").exists() else None
        summary = Summary.from_dict(document)
        run = RunInfo.from_dict(summary.run, where="run.json")
        return GateSide(label, run, _levels_by_id(summary), data)
    if path.is_dir():
        try:
            data = load_run(path)
        except RunDirError as exc:
            raise GateInputError(f"{label}: {exc}") from None
        return GateSide(label, data.run, _levels_by_id(summarize_run(data)), data)
    raise GateInputError(f"{label}: no such run directory or summary.json")


def incompatibilities(baseline: GateSide, current: GateSide) -> list[str]:
    """Sentences naming each run.json field that differs (fields absent on either side are not judged)."""
    problems = []
    for name, read in COMPARABLE_FIELDS.items():
        a, b = read(baseline.run), read(current.run)
        if a is not None and b is not None and a != b:
            problems.append(f"{name} differs: baseline {json.dumps(a)} vs current {json.dumps(b)}")
    for level in sorted(set(baseline.levels) & set(current.levels)):
        a, b = baseline.levels[level].strategy, current.levels[level].strategy
        if a and b and a != b:
            problems.append(f"level {level}: strategy differs ({a} vs {b})")
    return problems


def _levels_by_id(summary: Summary) -> dict[str, LevelResult]:
    return {level.level: level for level in summary.levels}


__all__ = ["GateInputError", "GateSide", "LATENCY_METRICS", "incompatibilities", "load_side", "summary_value"]
