"""One configuration of `servecap tune` measured for real: a `servecap sweep` of the tune's load
levels (its own reference server, Locust at each level) into RUN/configs/NN, then the throughput and
p99s of its best level under the SLO.

A classic model (classify) is judged on requests/s and p99 E2E; an LLM on output tokens/s and
p99 TTFT, TPOT and E2E against the SLO's limits. A level failing more than the SLO rule's share
of its requests does not meet it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
from rich.console import Console

from contract.records import RECORDS_FILE, read_records, tpot_s
from contract.slo import ERROR_RATE_LIMIT, SLO
from servecap.sweep.config import SweepConfig
from servecap.sweep.runner import Sweep
from servecap.tune.space import Measurement

LATENCIES = {"ttft_ms": "ttft_s", "tpot_ms": "tpot_s", "e2e_ms": "e2e_s"}


def measure_config(base: SweepConfig, server_args: str, run_dir: Path, slo: SLO, console: Console) -> Measurement:
    """Run `base` (its load levels) with `server_args` added, into run_dir, and judge it: the level of
    most throughput that meets the SLO (as Model Analyzer reads perf_analyzer's concurrency sweep), else
    the level that came closest."""
    config = replace(base, out_dir=str(run_dir), server_args=f"{base.server_args} {server_args}".strip())
    Sweep(config, console).run()
    records = read_records(run_dir / RECORDS_FILE)
    levels = {}
    for record in records:
        levels.setdefault(record["level"], []).append(record)
    judged = [replace(judge(rows, config.scenario, slo, str(run_dir)), level=level) for level, rows in levels.items()]
    if not judged:
        return Measurement(None, "", {}, False, run_dir=str(run_dir), reason="no level ran")
    meeting = [m for m in judged if m.meets and m.throughput is not None]
    if meeting:
        return max(meeting, key=lambda m: m.throughput)
    return min(judged, key=lambda m: (m.throughput is None, m.excess))


def judge(records: list[dict], scenario: str, slo: SLO, run_dir: str | None = None) -> Measurement:
    """The measured level's throughput and p99s from its records, and the SLO's verdict."""
    measured = [r for r in records if r["phase"] == "measure" and r["status"] != "incomplete"]
    ok = [r for r in measured if r["status"] == "ok"]
    unit = "req/s" if scenario == "classify" else "output tok/s"
    if not ok:
        return Measurement(None, unit, {}, False, errors=len(measured), run_dir=run_dir, reason="no request succeeded")
    span = max(r["t_start"] + r["e2e_s"] for r in ok) - min(r["t_start"] for r in ok)
    amount = len(ok) if scenario == "classify" else sum(r["output_tokens"] or 0 for r in ok)
    values = {"e2e_s": [r["e2e_s"] for r in ok]}
    if scenario != "classify":
        values["ttft_s"] = [r["ttft_s"] for r in ok if r["ttft_s"] is not None]
        values["tpot_s"] = [t for t in (tpot_s(r["e2e_s"], r["ttft_s"], r["output_tokens"]) for r in ok) if t is not None]
    p99_ms = {name: (float(np.percentile(values[column], 99)) * 1e3 if values.get(column) else None)
              for name, column in LATENCIES.items() if column in values}
    limits = {name: limit for name, limit in slo.as_dict().items() if limit is not None}
    excess = max([p99_ms[name] / limit for name, limit in limits.items() if p99_ms.get(name) is not None] or [0.0])
    errors = len(measured) - len(ok)
    meets = excess <= 1.0 and errors <= ERROR_RATE_LIMIT * len(measured)
    reason = None if meets else (f"{errors} of {len(measured)} requests failed" if excess <= 1.0 else
                                 f"p99 {excess:.2f}x its limit")
    return Measurement(amount / span if span > 0 else None, unit, p99_ms, meets, excess, errors, run_dir, reason)
