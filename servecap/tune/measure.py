"""One configuration of `servecap tune` measured for real: the experiment's load levels against its own
target (a one-target run of the runner into RUN/configs/NN), then the throughput and p99s of its best
level under the SLO.

A classic model (classify, embed) is judged on requests/s, an LLM on output tokens/s; every level is
judged against the SLO by the contract's one rule (through the runner's level results), so a
configuration meets the SLO here exactly when the same level would in a sweep's report.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rich.console import Console

from contract.slo import SLO_METRICS
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
    classic = experiment.workload.classic
    judged = [judge(stats, level, experiment, str(run_dir)) for level, stats in runner.results.items()]
    if not judged:
        return Measurement(None, "", {}, False, run_dir=str(run_dir), reason="no level ran")
    meeting = [m for m in judged if m.meets and m.throughput is not None]
    if meeting:
        return max(meeting, key=lambda m: m.throughput)
    return min(judged, key=lambda m: (m.throughput is None, m.excess))


def judge(stats: LevelStats, level: str, experiment: Experiment, run_dir: str | None = None) -> Measurement:
    """One level's throughput and p99s (its quick figures), and the SLO's verdict by the contract's rule."""
    classic = experiment.workload.classic
    unit = "req/s" if classic else "output tok/s"
    if not stats.requests or stats.errors == stats.requests:
        return Measurement(None, unit, {}, False, errors=stats.errors, run_dir=run_dir, level=level,
                           reason="no request succeeded")
    throughput = stats.request_rate_rps if classic else stats.output_tokens_per_s
    p99_ms = {name: (None if stats.p99(column) is None else stats.p99(column) * 1e3)
              for name, column in SLO_METRICS.items() if not classic or name == "e2e_ms"}
    p99_ms = {name: value for name, value in p99_ms.items() if value is not None or name != "ttfa_ms"}
    limits = experiment.slo.to_dict()
    excess = max([p99_ms[name] / limit for name, limit in limits.items() if p99_ms.get(name) is not None] or [0.0])
    check = stats.check(experiment.slo)
    return Measurement(throughput, unit, p99_ms, check.meets, excess, stats.errors, run_dir,
                       None if check.meets else check.reason, level)
