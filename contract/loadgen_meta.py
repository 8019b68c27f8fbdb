"""`requests.meta.json`: the load generator's own health per level, and the limits that judge it.

Run metadata that belongs to the records (load-generator health per level: CPU,
send lateness, in-flight cap hits, event-loop lag) lives next to them in `<records stem>.meta.json`:

    {"levels": {"c=8": {"processes": {worker: {...one process's summary...}},
                        "loop_lag_p50_s", "loop_lag_p99_s", "loop_lag_max_s": the worst process's,
                        "limited_by_loadgen": bool, "warnings": [str, ...]}}}

The limits are the contract between the load generator (which warns) and the report
(which flags a level as shaped by the generator, not the server). The event-loop lag has no fixed
limit: the report sets it beside each percentile's confidence interval (reports.summary.lag_limited).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

CPU_LIMIT_PCT = 90.0          # a generator process above this much CPU queues its own timings
LATENESS_P99_LIMIT_S = 1e-3   # open loop: sends later than this at p99 skew the offered load


def meta_path(records_path: str | os.PathLike) -> Path:
    """`runs/x/requests.jsonl` -> `runs/x/requests.meta.json`."""
    path = Path(records_path)
    return path.with_name(path.stem + ".meta.json")


def read_meta(records_path: str | os.PathLike) -> dict[str, Any]:
    path = meta_path(records_path)
    if not path.exists():
        return {}
    return json.loads(path.read_text())


def update_meta(records_path: str | os.PathLike, level: str, level_meta: dict[str, Any],
                another_round: bool = False) -> Path:
    """Write one level's load-generator metadata into the records' meta file (atomic replace).
    another_round: a later round of a level measured in rounds (sweep --rounds): merged with the
    earlier rounds' (`merge_rounds`) instead of replacing them."""
    path = meta_path(records_path)
    meta = read_meta(records_path) if path.exists() else {}
    levels = meta.setdefault("levels", {})
    earlier = levels.get(level)
    levels[level] = merge_rounds(earlier, level_meta) if another_round and earlier else level_meta
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def merge_rounds(earlier: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """One level's meta over its rounds: every round's processes, the worst lag, any limit, all warnings."""
    merged = {**later, "processes": {**(earlier.get("processes") or {}), **(later.get("processes") or {})},
              "limited_by_loadgen": bool(earlier.get("limited_by_loadgen") or later.get("limited_by_loadgen")),
              "warnings": [*(earlier.get("warnings") or []), *(later.get("warnings") or [])],
              "rounds": int(earlier.get("rounds") or 1) + 1}
    for key in ("loop_lag_p50_s", "loop_lag_p99_s", "loop_lag_max_s"):
        values = [m.get(key) for m in (earlier, later) if m.get(key) is not None]
        merged[key] = max(values, default=None)
    return merged
