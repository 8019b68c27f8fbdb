"""One configuration of `servecap tune` measured for real: the experiment's load levels against its own
target (a one-target run of the runner into RUN/configs/NN), then the throughput and p99s of its best
level under the SLO.

A classic model (classify, embed) is measured by requests/s, an LLM by output tokens/s; whether a level
meets the SLO is the contract's judge (contract.slo.judge) over its measure-phase requests (the runner's
level results carry them), as the sweep and the report judge it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from servecap.experiment.level_stats import LevelStats
from servecap.experiment.runner import Runner
from servecap.experiment.spec import Experiment
from servecap.tune.space import Measurement


def measure_config(base: Experiment, extra_args: str, run_dir: Path, console: Console) -> Measurement:
    """Run `base` with `extra_args` added to its target, into run_dir, and judge it: the level of most
    throughput that meets the SLO (as Model Analyzer reads perf_analyzer's concurrency sweep), else the
    level that came closest."""
    experiment = replace(base, out_dir=str(run_dir), targets=(base.targets[0].with_args(extra_args),))
    runner = Runner(experiment, console, command="servecap tune")
    runner.run()
    judged = [measure_level(stats, level, experiment, str(run_dir)) for level, stats in runner.results.items()]
    if not judged:
        return Measurement(None, "", {}, False, run_dir=str(run_dir), reason="no level ran")
    meeting = [m for m in judged if m.meets and m.throughput is not None]
    if meeting:
        return max(meeting, key=lambda m: m.throughput)
    return min(judged, key=lambda m: (m.throughput is None, m.excess))


def measure_level(stats: LevelStats, level: str, experiment: Experiment, run_dir: str | None = None) -> Measurement:
    """One level's throughput (its ok requests over its window), and the judge's verdict and p99s (ms) over its
    measure-phase requests: those its ok requests have values of, and any the SLO limits (None: no value, or
    unbounded by requests that never finished; the reason says which)."""
    classic = experiment.workload.classic
    unit = "req/s" if classic else "output tok/s"
    sample = stats.slo_sample
    judged = stats.check(experiment.slo)
    if not sample.ok:
        return Measurement(None, unit, {}, False, errors=sample.failed, run_dir=run_dir, level=level,
                           reason="no request succeeded")
    throughput = stats.request_rate_rps if classic else stats.output_tokens_per_s
    limits = experiment.slo.limits_s()
    p99_ms = {f"{column.removesuffix('_s')}_ms": p99 * 1e3 if p99 is not None and math.isfinite(p99) else None
              for column, p99 in judged.p99_s.items() if len(sample.values.get(column, ())) or column in limits}
    return Measurement(throughput, unit, p99_ms, judged.meets, judged.excess, sample.failed, run_dir,
                       judged.reason or None, level)
