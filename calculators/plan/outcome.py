"""What a fleet run means for its users: latency per window against the SLO, attainment, and cost.

Windows are fixed spans of send time (`window_s`, 5 minutes by default, as SLOs are usually read).
Whether a window meets the SLO is the contract's judge (contract.slo.judge) over the requests sent
in it, as a measured level is judged: a request lost with a killed replica (or a real fleet's
error) failed, one no replica finished is unfinished and unbounded in every p99, so a window cannot
pass by dropping requests. Attainment is the share of windows with at least `min_requests`
requests that meet it.

Cost: every replica is billed from when it was asked for until it stopped (`FleetRun.replica_seconds`),
for its GPUs at the catalog's hourly price; the day's cost scales the run's span to 24 hours; the cost
per million output tokens divides by the tokens the run generated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from calculators.plan.fleet_run import FleetRun
from contract.slo import LATENCY_COLUMNS, SLO, SloSample, judge

METRICS = ("ttft_s", "tpot_s", "e2e_s")   # the latencies the plan's outputs show per window


@dataclass(frozen=True)
class PlanSlo:
    """The plan's target: `slo` (the contract's, limits in ms) met in at least `attainment` of the windows."""

    slo: SLO
    attainment: float = 0.99

    def __post_init__(self) -> None:
        if not isinstance(self.slo, SLO):
            raise ValueError(f"PlanSlo.slo must be a contract.slo.SLO, got {self.slo!r}")
        if not 0 < self.attainment <= 1:
            raise ValueError(f"attainment target must be in (0, 1], got {self.attainment!r}")


@dataclass(frozen=True)
class Window:
    start_s: float
    requests: int
    unfinished: int             # never finished (neither ok nor failed)
    p50: dict[str, float]       # NaN: no value; +inf: unfinished requests reach that far
    p99: dict[str, float]       # the p99s the judge read
    met: bool | None            # None: fewer requests than the minimum, not judged
    ready_replicas_mean: float
    failed: int = 0             # lost with a killed replica (a real fleet: an error)
    why_not: str = ""           # the judge's reason when it does not meet the SLO


@dataclass(frozen=True)
class Outcome:
    windows: tuple[Window, ...]
    attainment: float | None    # None: no window was judged
    meets_target: bool | None
    requests: int
    unfinished: int             # never finished (neither ok nor failed)
    output_tokens: int
    replica_hours: float
    gpu_hours: float
    usd: float | None
    usd_per_day: float | None
    usd_per_million_tokens: float | None
    span_s: float
    p50: dict[str, float] | None = None   # over every request of the run (NaN: no value; +inf: unfinished ones)
    p99: dict[str, float] | None = None
    failed: int = 0                       # lost with a killed replica (a real fleet: an error)

    def to_dict(self) -> dict:
        return {
            "attainment": self.attainment, "meets_target": self.meets_target, "requests": self.requests,
            "unfinished": self.unfinished, "failed": self.failed, "output_tokens": self.output_tokens,
            "replica_hours": self.replica_hours,
            "gpu_hours": self.gpu_hours, "usd": self.usd, "usd_per_day": self.usd_per_day,
            "usd_per_million_tokens": self.usd_per_million_tokens, "span_s": self.span_s,
            **{f"{m.removesuffix('_s')}_p50_s": (self.p50 or {}).get(m) for m in METRICS},
            **{f"{m.removesuffix('_s')}_p99_s": (self.p99 or {}).get(m) for m in METRICS},
            "windows": [{"start_s": w.start_s, "requests": w.requests, "unfinished": w.unfinished,
                         "failed": w.failed, "ready_replicas_mean": w.ready_replicas_mean, "met": w.met,
                         "why_not": w.why_not or None,
                         **{f"{m.removesuffix('_s')}_p50_s": w.p50[m] for m in METRICS},
                         **{f"{m.removesuffix('_s')}_p99_s": w.p99[m] for m in METRICS}}
                        for w in self.windows],
        }


def requests_sample(run: FleetRun, members: np.ndarray | slice = slice(None)) -> SloSample:
    """Requests of a fleet run (`members`: their indices; all by default) as the SLO's judge reads them:
    finished ones ok, those `run.lost` or `run.errored` marks failed, the rest (never finished) unfinished."""
    finished = np.isfinite(run.end_s[members])
    failed = np.zeros(len(finished), dtype=bool)
    for marked in (run.lost, run.errored):
        if marked is not None:
            failed |= marked[members] & ~finished
    return SloSample.from_arrays(ok=finished, unfinished=~finished & ~failed,
                                 **{column: getattr(run, column)[members] for column in LATENCY_COLUMNS})


def _figure(value: float | None) -> float:
    return math.nan if value is None else value


def outcome(run: FleetRun, slo: PlanSlo, *, gpus_per_replica: int = 1, hourly_usd_per_gpu: float | None = None,
            window_s: float = 300.0, min_requests: int = 1) -> Outcome:
    if not window_s > 0:
        raise ValueError(f"window must be positive seconds, got {window_s!r}")
    last = float(run.send_s.max()) if len(run.send_s) else 0.0   # a session's later turns are sent out of order
    edges = np.arange(int(last // window_s) + 2) * window_s     # every send inside one window
    index = (run.send_s // window_s).astype(np.int64)
    order = np.argsort(index, kind="stable")
    bounds = np.searchsorted(index[order], np.arange(len(edges)))
    windows = []
    for k in range(len(edges) - 1):
        members = order[bounds[k]:bounds[k + 1]]
        sample = requests_sample(run, members)
        verdict = judge(slo.slo, sample)
        judged = len(members) >= min_requests and len(members) > 0
        times = edges[k] + (np.arange(10) + 0.5) * window_s / 10
        windows.append(Window(float(edges[k]), int(len(members)), sample.unfinished,
                              {m: _figure(sample.percentile(m, 50)) for m in METRICS},
                              {m: _figure(verdict.p99_s[m]) for m in METRICS}, verdict.meets if judged else None,
                              float(run.ready_over_time(times).mean()), sample.failed,
                              verdict.reason if judged else ""))
    judged = [w for w in windows if w.met is not None]
    attainment = sum(w.met for w in judged) / len(judged) if judged else None
    finished = np.isfinite(run.end_s)
    tokens = int(run.output[finished].sum())
    replica_hours = run.replica_seconds() / 3600
    gpu_hours = replica_hours * gpus_per_replica
    usd = None if hourly_usd_per_gpu is None else gpu_hours * hourly_usd_per_gpu
    run_span = max(run.horizon_s, 1e-9)
    everything = requests_sample(run)
    return Outcome(
        windows=tuple(windows), attainment=attainment,
        meets_target=None if attainment is None else attainment >= slo.attainment,
        requests=int(len(run.send_s)), unfinished=everything.unfinished, output_tokens=tokens,
        replica_hours=replica_hours, gpu_hours=gpu_hours, usd=usd,
        usd_per_day=None if usd is None else usd * 86400 / run_span,
        usd_per_million_tokens=None if usd is None or not tokens else usd / (tokens / 1e6),
        span_s=run_span, p50={m: _figure(everything.percentile(m, 50)) for m in METRICS},
        p99={m: _figure(everything.percentile(m)) for m in METRICS}, failed=everything.failed)
