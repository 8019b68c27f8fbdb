"""One configuration of `servecap tune` measured for real: a `servecap sweep` of the tune's load
levels (its own reference server, Locust at each level) into RUN/configs/NN, then the throughput and
p99s of its best level under the SLO.

A classic model (classify) is measured by requests/s, an LLM by output tokens/s; whether a level
meets the SLO is the contract's judge (contract.slo.judge) over its measure-phase requests, as the
sweep and the report judge it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from contract.records import RECORDS_FILE, Record, read_records
from contract.slo import SLO, SloSample, judge
from servecap.sweep.config import SweepConfig
from servecap.sweep.runner import Sweep
from servecap.tune.space import Measurement


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
    judged = [replace(measure_level(rows, config.scenario, slo, str(run_dir)), level=level)
              for level, rows in levels.items()]
    if not judged:
        return Measurement(None, "", {}, False, run_dir=str(run_dir), reason="no level ran")
    meeting = [m for m in judged if m.meets and m.throughput is not None]
    if meeting:
        return max(meeting, key=lambda m: m.throughput)
    return min(judged, key=lambda m: (m.throughput is None, m.excess))


def measure_level(records: list[dict], scenario: str, slo: SLO, run_dir: str | None = None) -> Measurement:
    """One level's throughput from its ok requests, and the judge's verdict and p99s (ms) over its
    measure-phase requests: those its ok requests have values of, and any the SLO limits (None: no
    value, or unbounded by requests that never finished; the reason says which)."""
    measured = [Record.from_dict(r) for r in records if r["phase"] == "measure"]
    ok = [r for r in measured if r.status == "ok"]
    sample = SloSample.from_records(measured)
    judged = judge(slo, sample)
    errors = sample.failed
    unit = "req/s" if scenario == "classify" else "output tok/s"
    if not ok:
        return Measurement(None, unit, {}, False, errors=errors, run_dir=run_dir, reason="no request succeeded")
    span = max(r.t_start + r.e2e_s for r in ok) - min(r.t_start for r in ok)
    amount = len(ok) if scenario == "classify" else sum(r.output_tokens or 0 for r in ok)
    limits = slo.limits_s()
    p99_ms = {f"{column.removesuffix('_s')}_ms": p99 * 1e3 if p99 is not None and math.isfinite(p99) else None
              for column, p99 in judged.p99_s.items() if len(sample.values.get(column, ())) or column in limits}
    return Measurement(amount / span if span > 0 else None, unit, p99_ms, judged.meets, judged.excess, errors,
                       run_dir, judged.reason or None)
