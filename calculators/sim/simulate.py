"""Discrete-event simulation of a serving engine: TTFT, TPOT and E2E percentiles per load level.

``simulate(server, workload, step_model)`` draws the workload (seeded), runs the engine's own
scheduler for the strategy on a step-time clock (``calculators.sim.sim_engine``) and
summarises the measured window:
    ttft_s = first token - arrival;  e2e_s = last token - arrival;
    tpot_s = (e2e - ttft) / (output tokens - 1)  (requests with one output token have none)
Percentiles are numpy's default (linear interpolation), as in the reports' summary.json.
The step-time model comes from ``calculators.calibrate.fit_step_model`` (measured) or
``calculators.sim.step_model.step_model_from_roofline`` (predicted for a GPU).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from calculators.sim.sim_engine import run_engine
from calculators.sim.state import Arrivals, StepClock, Trace
from calculators.sim.workload import LengthDist, ServerConfig, Workload
from calculators.sim.step_model import StepTimeModel

PERCENTILES = (50, 90, 95, 99)

__all__ = ["LengthDist", "ServerConfig", "Workload", "SimResult", "Trace", "simulate", "simulate_levels", "simulate_trace"]


@dataclass(frozen=True)
class SimResult:
    """One load level. ``metrics[name]`` = {count, mean, p50, p90, p95, p99} for ttft_s, tpot_s, e2e_s;
    ``steps`` and ``preemptions`` count the whole run (warm-up and tail included)."""

    strategy: str
    offered: dict
    requests: int
    duration_s: float
    request_rate_rps: float
    output_tokens_per_s: float
    mean_batch_size: float
    utilization: float
    metrics: dict
    steps: int = 0
    preemptions: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    def p50(self, metric: str) -> float:
        return self.metrics[metric]["p50"]


def _summary(values: np.ndarray) -> dict:
    values = values[~np.isnan(values)]
    if not len(values):
        return {"count": 0, "mean": None, **{f"p{p}": None for p in PERCENTILES}}
    points = np.percentile(values, PERCENTILES)
    return {"count": int(len(values)), "mean": float(values.mean()),
            **{f"p{p}": float(v) for p, v in zip(PERCENTILES, points)}}


def simulate_trace(server: ServerConfig, workload: Workload, step_model: StepTimeModel) -> Trace:
    """Per-request arrival, first-token and end times of one run (the raw data behind ``simulate``)."""
    rng = np.random.default_rng(workload.seed)
    n = workload.requests
    trace = Trace(prompt=workload.prompt_tokens.sample(rng, n), output=workload.output_tokens.sample(rng, n),
                  arrival=np.zeros(n), first_token=np.full(n, np.nan), end=np.full(n, np.nan))
    schedule = None if workload.rate_rps is None else workload.open_loop_arrivals(rng)
    arrivals = Arrivals(trace, schedule=schedule, concurrency=workload.concurrency)
    run_engine(server, StepClock(step_model, rng), trace, arrivals)
    return trace


def simulate(server: ServerConfig, workload: Workload, step_model: StepTimeModel) -> SimResult:
    """Run one load level; deterministic for a given ``workload.seed``."""
    trace = simulate_trace(server, workload, step_model)
    n = workload.requests
    first = int(n * workload.warmup_fraction)
    last = n - (workload.concurrency or 0) if workload.concurrency and n - workload.concurrency > first else n
    window = slice(first, last)
    ttft = trace.first_token[window] - trace.arrival[window]
    e2e = trace.end[window] - trace.arrival[window]
    outputs = trace.output[window]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(outputs > 1, (e2e - ttft) / (outputs - 1), np.nan)
    start, stop = float(trace.arrival[window].min()), float(trace.end[window].max())
    duration = max(stop - start, 1e-12)
    offered = {"concurrency": workload.concurrency} if workload.concurrency else {"rate_rps": workload.rate_rps}
    return SimResult(
        strategy=server.strategy, offered=offered, requests=last - first, duration_s=duration,
        request_rate_rps=(last - first) / duration, output_tokens_per_s=float(outputs.sum()) / duration,
        mean_batch_size=trace.sequences_in_steps / max(trace.steps, 1),
        utilization=min(1.0, trace.busy_s / float(np.nanmax(trace.end))),
        metrics={"ttft_s": _summary(ttft), "tpot_s": _summary(tpot), "e2e_s": _summary(e2e)},
        steps=trace.steps, preemptions=trace.preemptions,
    )


def simulate_levels(server: ServerConfig, workload: Workload, step_model: StepTimeModel, *,
                    concurrencies: list[int] | None = None, rates: list[float] | None = None) -> list[SimResult]:
    """``simulate`` at each closed-loop concurrency or open-loop rate (same seed, same lengths)."""
    from dataclasses import replace

    if (concurrencies is None) == (rates is None):
        raise ValueError("give exactly one of concurrencies and rates")
    if concurrencies is not None:
        return [simulate(server, replace(workload, concurrency=c, rate_rps=None), step_model) for c in concurrencies]
    return [simulate(server, replace(workload, concurrency=None, rate_rps=r), step_model) for r in rates]
