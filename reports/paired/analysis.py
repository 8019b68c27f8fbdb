"""A compare run directory -> its per-slice table and its verdict (what `servecap compare` and
`servecap gate DIR` both report, so the two always agree).

Reads run.json (the `compare` section: thresholds, the looks and their alpha), requests.jsonl
(records with `arm` and `slice`) and slices.jsonl (one line per slice: its arm, pair,
times and the server CPU seconds it cost).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from reports.paired.decision import CompareVerdict, decide, thresholds_for
from reports.paired.slices import slice_table
from reports.paired.stats import ALPHA
from reports.run_data import RunData, RunDirError, load_run

SLICES_FILE = "slices.jsonl"


class CompareDirError(ValueError):
    """Not a compare run directory, or nothing in it can be judged."""


@dataclass
class CompareAnalysis:
    run: RunData
    slices: pd.DataFrame          # slices.jsonl, measured slices only
    table: pd.DataFrame           # per slice: arm, pair and every metric (reports.paired.slices)
    verdict: CompareVerdict
    notes: list[str]

    def pair_times(self) -> dict[int, float]:
        """{pair: its start, seconds after the first measured pair started}."""
        starts = self.slices.groupby("pair")["t_start"].min()
        return {int(pair): float(t - starts.min()) for pair, t in starts.items()}


def is_compare_dir(path: str | Path) -> bool:
    path = Path(path)
    if not (path / SLICES_FILE).exists():
        return False
    try:
        return "compare" in json.loads((path / "run.json").read_text())
    except (OSError, ValueError):
        return False


def read_slice_log(path: Path) -> list[dict]:
    """slices.jsonl's lines (a torn last line from a killed run is skipped); [] when absent."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def read_slices(path: Path) -> pd.DataFrame:
    """The measured slices of slices.jsonl as a frame."""
    frame = pd.DataFrame(read_slice_log(path), columns=["slice", "pair", "arm", "phase", "t_start", "t_end", "t_drained", "sent",
                                        "drained", "excluded", "cpu_s"])
    return frame[frame["phase"] == "measure"].astype({"pair": "Int64"})


def analyse(run_dir: str | Path, *, max_regression: dict[str, float] | None = None, replace_defaults: bool = False,
            alpha: float | None = None, seed: int = 0) -> CompareAnalysis:
    """The verdict of a compare run; thresholds default to what the run was judged with. Each metric
    is judged look by look as the run judged it (reports.paired.decision.decide); `alpha` adds a new
    look over every pair so far. CompareDirError when it is not a compare run or holds no measured pair."""
    run_dir = Path(run_dir)
    if not is_compare_dir(run_dir):
        raise CompareDirError(f"{run_dir} is not a compare run directory (no run.json 'compare' section "
                              f"or no {SLICES_FILE}); use servecap compare to make one")
    try:
        data = load_run(run_dir)
    except RunDirError as exc:
        raise CompareDirError(str(exc)) from None
    info = data.run.compare
    slices = read_slices(run_dir / SLICES_FILE)
    if slices.empty:
        raise CompareDirError(f"{run_dir}: no measured slice finished yet")
    if max_regression is None and info.thresholds:
        gated = dict(info.thresholds)
    else:
        gated = thresholds_for(max_regression, replace_defaults=replace_defaults)
    looks = [(look.pairs, look.alpha) for look in info.looks if look.pairs and look.alpha]
    if alpha is not None:          # a new look over every pair so far, after the recorded ones
        looks.append((None, alpha))
    elif not looks:                # no look recorded (stopped before the first): one over every pair
        looks = [(None, info.alpha or ALPHA)]
    table = slice_table(data.records, data.itl_gaps, data.itl_record, slices)
    verdict = decide(table, gated, looks=looks, seed=seed, arm_values=_arm_values(data, slices))
    # a compare run samples no device and scrapes no /metrics: the report's notes about those files do not apply
    notes = [note for note in data.missing if not note.startswith(("samples.csv", "server_metrics.csv"))]
    last_look = info.looks[-1].pairs if info.looks else None
    if alpha is None and last_look and slices["pair"].nunique() > last_look:
        notes.append(f"{slices['pair'].nunique() - last_look} pair(s) after the last look (at {last_look} pairs) "
                     "are shown in the figure but not judged")
    excluded = int(slices["excluded"].fillna(0).sum())
    drained = int(slices["drained"].fillna(0).sum())
    if excluded:
        notes.append(f"{excluded} request(s) were cut off at a switch (switch 'excluded') and left out")
    if drained:
        notes.append(f"{drained} request(s) finished while their slice drained (switch 'drained'); they count "
                     "in the slice they were sent in")
    return CompareAnalysis(data, slices, table, verdict, notes)


def _arm_values(data: RunData, slices: pd.DataFrame) -> dict[str, tuple[list[np.ndarray], list[np.ndarray]]]:
    """Per pair, each arm's raw TTFT, TPOT and E2E values (for the whole-arm p99s' paired bootstrap)."""
    records = data.records
    usable = (records["status"] == "ok") & (records["phase"] == "measure") & records["slice"].notna()
    if "switch" in records:
        usable &= records["switch"].astype(object).ne("excluded")
    chosen = records[usable]
    by_slice = {int(s): group for s, group in chosen.groupby("slice", observed=True)}
    out = {}
    for metric in ("ttft_s", "tpot_s", "e2e_s"):
        a_values, b_values = [], []
        for _, pair in slices.groupby("pair"):
            arms = {row.arm: int(row.slice) for row in pair.itertuples()}
            if set(arms) != {"a", "b"}:
                continue
            for arm, target in (("a", a_values), ("b", b_values)):
                values = by_slice.get(arms[arm], pd.DataFrame({metric: []}))[metric].to_numpy(dtype=np.float64)
                target.append(values[np.isfinite(values)])
        out[metric] = (a_values, b_values)
    return out
