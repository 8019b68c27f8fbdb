"""Read a run directory into pandas once; every table and figure is a function of `RunData`.

The run directory (../shared/DESIGN.md): run.json, requests.jsonl, samples.csv,
server_metrics.csv, and the engine's own record when the server keeps one
(engine_steps.csv, engine_requests.csv: contract.engine_record) and the canary's
(canary.csv: contract.canary). Anything absent
or damaged is recorded in `RunData.missing` as a sentence for the report, never raised,
so a killed run still reports (a server without an engine record is not "missing": the
predictions say what they did without it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from reports.level_ids import parse_level_id
from reports.records_reader import RecordsError, read_records
from contract.canary import CANARY_COLUMNS, CANARY_FILE
from contract.engine_record import (REQUEST_COLUMNS, REQUEST_FIELDS_ADDED, REQUESTS_FILE, STEP_COLUMNS,
                                   STEP_FIELDS_ADDED, STEPS_FILE)
from contract.level_windows import level_windows
from contract.records import RECORDS_FILE, tpot_s
from contract.run_json import RunInfo

__all__ = ["RunData", "RunDirError", "load_run"]

SAMPLE_COLUMNS = ("t", "source", "device", "util_pct", "mem_used_bytes", "mem_total_bytes",
                  "power_w", "sm_clock_mhz", "temp_c")
METRIC_COLUMNS = ("t", "name", "labels", "value")


class RunDirError(ValueError):
    """The run directory cannot be reported at all (no such directory, no records)."""


@dataclass(frozen=True)
class RunData:
    """Everything in one run directory.

    Attributes:
        run_dir: where it was read from.
        run: run.json, typed (the contract's RunInfo; empty sections when absent).
        run_json: run.json as the file holds it ({} when absent): summary.json embeds it as is.
        records: one row per request record; the schema columns the report uses (all but
            response_id, read only to join with an engine request record) plus derived
            `strategy`, `offered_kind`, `offered_value`, `t_end` (t_start + e2e_s) and
            `tpot_s` (the contract's tpot_s: NaN below 2 output tokens).
            `itl_s` itself is not a column: see itl_gaps.
        itl_gaps: every inter-token gap of every record, float64 [G].
        itl_record: for each gap, the row position in `records` it belongs to, int64 [G].
        samples: samples.csv, or None when absent.
        server_metrics: server_metrics.csv, or None when absent.
        missing: sentences naming what is missing, torn or unreadable.
        loadgen_meta: requests.meta.json (the load generator's own health per level), {} if absent.
        engine_steps, engine_requests: the engine's step and request records, or None when the
            run has none (an external server, an older run).
        canary: canary.csv (each core's speed over the run), or None when absent (an older run).
    """

    run_dir: Path
    run: RunInfo
    run_json: dict
    records: pd.DataFrame
    itl_gaps: np.ndarray
    itl_record: np.ndarray
    samples: pd.DataFrame | None
    server_metrics: pd.DataFrame | None
    missing: list[str] = field(default_factory=list)
    loadgen_meta: dict = field(default_factory=dict)
    engine_steps: pd.DataFrame | None = None
    engine_requests: pd.DataFrame | None = None
    canary: pd.DataFrame | None = None

    def measured_ok(self) -> pd.Series:
        """Boolean mask of records that enter the latency summary: status ok, phase measure."""
        return (self.records["status"] == "ok") & (self.records["phase"] == "measure")

    def level_windows(self) -> dict[str, list[tuple[float, float]]]:
        """{level: its measured windows}: one per round over its measure-phase records
        (contract.level_windows)."""
        measure = self.records[self.records["phase"] == "measure"]
        return {str(level): frame_windows(frame) for level, frame in measure.groupby("level", observed=True)}


def frame_windows(frame: pd.DataFrame) -> list[tuple[float, float]]:
    """One level's measured windows from its records' rows (`t_start`, `t_end`, `round` when present)."""
    rounds = frame["round"].to_numpy(dtype=float) if "round" in frame.columns else None
    return level_windows(frame["t_start"].to_numpy(dtype=float), frame["t_end"].to_numpy(dtype=float), rounds)


def load_run(run_dir: str | Path) -> RunData:
    """Read `run_dir`; RunDirError only when there is nothing to report."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"run directory {str(run_dir)!r} does not exist or is not a directory")
    missing: list[str] = []
    run_json = _read_run_json(run_dir / "run.json", missing)
    problems: list[str] = []
    run = RunInfo.from_dict(run_json, problems, "run.json")
    missing += problems
    engine_requests = _read_optional_csv(run_dir / REQUESTS_FILE, REQUEST_COLUMNS, missing,
                                         defaults=REQUEST_FIELDS_ADDED)
    try:
        records, gaps, gap_rows = read_records(run_dir / RECORDS_FILE, missing,
                                               response_id=engine_requests is not None)
    except RecordsError as exc:
        raise RunDirError(str(exc)) from None
    _add_derived_columns(records, run)
    samples = _read_csv(run_dir / "samples.csv", SAMPLE_COLUMNS, missing)
    metrics = _read_csv(run_dir / "server_metrics.csv", METRIC_COLUMNS, missing)
    _note_missing_levels(run, records, missing)
    meta = _read_optional_json(run_dir / "requests.meta.json", missing)
    steps = _read_optional_csv(run_dir / STEPS_FILE, STEP_COLUMNS, missing, defaults=STEP_FIELDS_ADDED)
    canary = _numeric_rows(_read_optional_csv(run_dir / CANARY_FILE, CANARY_COLUMNS, missing),
                           ("t", "core", "cpu_s", "wall_s"), CANARY_FILE, missing)
    return RunData(run_dir, run, run_json, records, gaps, gap_rows, samples, metrics, missing, meta,
                   steps, engine_requests, canary)


def _parse_csv(path: Path, missing: list[str], left_out: str) -> pd.DataFrame | None:
    """The CSV (bad lines skipped), or None with "<name> is unreadable (...); <left_out>" in `missing`."""
    try:
        return pd.read_csv(path, on_bad_lines="skip")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        missing.append(f"{path.name} is unreadable ({exc}); {left_out}")
        return None


def _read_optional_csv(path: Path, columns: tuple[str, ...], missing: list[str],
                       defaults: dict | None = None) -> pd.DataFrame | None:
    """A file only some servers give: None when absent or empty; a damaged one is said in `missing`.
    `defaults`: columns added since, with the value a file written before them stands for."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    frame = _parse_csv(path, missing, "predictions run without it")
    if frame is None:
        return None
    for name, value in (defaults or {}).items():
        if name not in frame.columns:
            frame[name] = value
    absent = [name for name in columns if name not in frame.columns]
    if absent:
        missing.append(f"{path.name} lacks column(s) {', '.join(absent)}; predictions run without it")
        return None
    return frame if len(frame) else None


def _numeric_rows(frame: pd.DataFrame | None, columns: tuple[str, ...], name: str,
                  missing: list[str]) -> pd.DataFrame | None:
    """`frame` with `columns` as numbers, less the rows where one is not (a killed run's torn last line);
    how many were left out is said in `missing`."""
    if frame is None:
        return None
    frame = frame.copy()
    for column in columns:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    bad = frame[list(columns)].isna().any(axis=1)
    if bad.any():
        missing.append(f"{name}: {int(bad.sum())} row(s) unreadable, left out")
        frame = frame[~bad]
    frame["core"] = frame["core"].astype(int)
    return frame if len(frame) else None


def _read_optional_json(path: Path, missing: list[str]) -> dict:
    if not path.exists():
        return {}
    try:
        value = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        missing.append(f"{path.name} is not valid JSON ({exc}); load-generator health left out")
        return {}
    return value if isinstance(value, dict) else {}


def _read_run_json(path: Path, missing: list[str]) -> dict:
    if not path.exists():
        missing.append("run.json is missing: no run configuration, planned levels or host info")
        return {}
    try:
        run = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        missing.append(f"run.json is not valid JSON ({exc}); reported without it")
        return {}
    if not isinstance(run, dict):
        missing.append("run.json is not a JSON object; reported without it")
        return {}
    return run


def _add_derived_columns(records: pd.DataFrame, run: RunInfo) -> None:
    parsed = {level: parse_level_id(level, run.server.strategy) for level in records["level"].unique()}
    records["strategy"] = records["level"].map({k: v.strategy for k, v in parsed.items()})
    records["offered_kind"] = records["level"].map({k: v.offered_kind for k, v in parsed.items()})
    records["offered_value"] = records["level"].map({k: v.offered_value for k, v in parsed.items()}).astype(float)
    records["t_end"] = records["t_start"] + records["e2e_s"].fillna(0.0)
    records["tpot_s"] = tpot_s(records["e2e_s"].to_numpy(), records["ttft_s"].to_numpy(),
                               records["output_tokens"].to_numpy())


def _read_csv(path: Path, columns: tuple[str, ...], missing: list[str]) -> pd.DataFrame | None:
    if not path.exists():
        missing.append(f"{path.name} is missing: its figures and per-level means are left out")
        return None
    frame = _parse_csv(path, missing, "left out")
    if frame is None:
        return None
    absent = [name for name in columns if name not in frame.columns]
    if "t" in absent:
        missing.append(f"{path.name} has no 't' column; left out")
        return None
    if absent:
        missing.append(f"{path.name} lacks column(s): {', '.join(absent)}")
    for name in absent:
        frame[name] = np.nan
    if frame.empty:
        missing.append(f"{path.name} has no rows")
    return frame


def _note_missing_levels(run: RunInfo, records: pd.DataFrame, missing: list[str]) -> None:
    for entry in run.levels:
        if not isinstance(entry.level, str):
            continue
        if entry.status in ("failed", "interrupted", "not run"):
            code = f" (exit code {entry.exit_code})" if entry.exit_code not in (None, 0) else ""
            missing.append(f"level {entry.level} {entry.status}{code} according to run.json")
    present = set(records["level"].unique())
    measured = set(records.loc[records["phase"] == "measure", "level"].unique())
    planned = run.planned_levels()
    for level in planned:
        if level not in present:
            missing.append(f"level {level} is missing: planned in run.json but has no records")
        elif level not in measured:
            missing.append(f"level {level} has no measure-phase records (warm-up only)")
    for level in sorted(present - measured - set(planned)):
        missing.append(f"level {level} has no measure-phase records (warm-up only)")
    unparsed = sorted(records.loc[records["offered_kind"].isna(), "level"].unique())
    if unparsed:
        missing.append(f"level id(s) without an offered load (c=N or rps=R): {', '.join(unparsed)}")
