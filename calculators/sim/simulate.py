"""Discrete-event simulation of a serving engine: TTFT, TPOT and E2E percentiles per load level.

``simulate(server, workload, step_model, front_end)`` draws the workload (seeded), runs the
engine's own scheduler for the strategy on a step-time clock (``calculators.sim.sim_engine``),
adds each request's front-end delays (``calculators.sim.front_end``) and summarises the
measured window as the client sees it:
    ttft_s = in + (engine first token - engine arrival) + first_out;  e2e_s likewise with last_out;
    tpot_s = (e2e - ttft) / (output tokens - 1)  (requests with one output token have none);
    ttfa_s = in + (engine first answer token - engine arrival) + first_out  (a reasoning model's
             answer begins after its reasoning tokens, decoded like any other: ``SimWorkload.reasoning_tokens``)
Percentiles are numpy's default (linear interpolation), as in the reports' summary.json.
The step-time model comes from ``calculators.sim.calibrate.fit_step_model`` (measured) or
``calculators.sim.step_model.step_model_from_roofline`` (predicted for a GPU).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import numpy as np

from calculators.sim.front_end import FrontEnd
from calculators.sim.sim_engine import run_engine
from contract.model_mix import BASE
from calculators.sim.state import Arrivals, StepClock, Trace
from calculators.sim.workload import MeasuredLengths, SimServer, SimWorkload
from calculators.sim.step_model import StepTimeModel
from contract.records import tpot_s

PERCENTILES = (50, 90, 95, 99)

__all__ = ["EmptyWindow", "FrontEnd", "MeasuredLengths", "SimServer", "SimWorkload", "SimResult", "Trace",
           "measured_window",
           "simulate", "simulate_levels", "simulate_trace"]


@dataclass(frozen=True)
class SimResult:
    """One load level. ``metrics[name]`` = {count, mean, p50, p90, p95, p99} for ttft_s, tpot_s, e2e_s
    as the client sees them (the engine's own clock without a front end: then ``engine_metrics``
    is the same); ``steps`` and ``preemptions`` count the whole run (warm-up and tail included)."""

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
    engine_metrics: dict | None = None

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


class EmptyWindow(ValueError):
    """A level whose measure window no simulated request falls in: past what that window can measure."""


MAX_REGROWTHS = 8   # a time window that outlasts the requests drawn doubles them, at most this often


def simulate_trace(server: SimServer, workload: SimWorkload, step_model: StepTimeModel,
                   front_end: FrontEnd | None = None, *, fast_decodes: bool = True, on_step=None,
                   speeds: tuple[tuple[float, float], ...] = ()) -> Trace:
    """Per-request arrival, first-token and end times of one run (the raw data behind ``simulate``).
    With a time window, enough requests are drawn to keep the load on until its end. `on_step`: see
    ``sim_engine.run_engine`` (called again from the start if the window needs more requests)."""
    for _ in range(MAX_REGROWTHS):
        rng = np.random.default_rng(workload.seed)
        n = workload.request_count
        prompt, output, reasoning = workload.sample_lengths(rng, n)
        trace = Trace(prompt=prompt, output=output, arrival=np.zeros(n), first_token=np.full(n, np.nan),
                      end=np.full(n, np.nan), reasoning=reasoning)
        if workload.model_mix is not None:   # a stream of its own: the lengths and arrivals stay as they were
            names = workload.model_mix.draw_many(np.random.default_rng([workload.seed, 2]), n)
            trace.lora = [None if name == BASE else name for name in names]
        schedule = None if workload.concurrency else workload.open_loop_arrivals(rng)
        arrivals = Arrivals(trace, schedule=schedule, concurrency=workload.concurrency, front_end=front_end,
                            rng=np.random.default_rng([workload.seed, 1]))
        run_engine(server, StepClock(step_model, rng, speeds), trace, arrivals, horizon_s=workload.horizon_s,
                   fast_decodes=fast_decodes, on_step=on_step, seed=workload.seed)
        if workload.arrival_times or not _ran_dry(trace, workload, arrivals):
            return trace
        workload = replace(workload, requests=2 * workload.requests)
    raise RuntimeError(f"the time window needs more than {workload.requests} requests")


def _ran_dry(trace: Trace, workload: SimWorkload, arrivals: Arrivals) -> bool:
    """Did the load stop before the window's end for want of requests (every one sent, the last before it)?"""
    if workload.duration_s is None:
        return False
    return arrivals.sent >= len(trace.prompt) and float(trace.client_send.max()) < workload.horizon_s


def measured_window(trace: Trace, workload: SimWorkload) -> np.ndarray:
    """Indices of the requests a load test would have measured (``SimWorkload``'s window)."""
    n = len(trace.prompt)
    if workload.duration_s is not None:
        ends = trace.client_e2e() + trace.client_send
        keep = (trace.client_send >= workload.warmup_s) & (ends <= workload.horizon_s)
        return np.flatnonzero(keep & np.isfinite(ends))
    first = int(n * workload.warmup_fraction)
    c = workload.concurrency
    last = n - c if c and n - c > first else n
    return np.arange(first, last)


def _metrics(ttft: np.ndarray, e2e: np.ndarray, outputs: np.ndarray, ttfa: np.ndarray) -> dict:
    return {"ttft_s": _summary(ttft), "tpot_s": _summary(tpot_s(e2e, ttft, outputs)), "e2e_s": _summary(e2e),
            "ttfa_s": _summary(ttfa)}


def simulate(server: SimServer, workload: SimWorkload, step_model: StepTimeModel,
             front_end: FrontEnd | None = None, *, fast_decodes: bool = True,
             speeds: tuple[tuple[float, float], ...] = ()) -> SimResult:
    """Run one load level; deterministic for a given ``workload.seed``. ``speeds``: the machine's
    speed over the run, ((from_s, factor), ...) (``state.StepClock``): every step's time x factor."""
    trace = simulate_trace(server, workload, step_model, front_end, fast_decodes=fast_decodes, speeds=speeds)
    window = measured_window(trace, workload)
    if not len(window):
        raise EmptyWindow("no simulated request falls in the measure window (too short a window or too slow a step)")
    return result_of(server, workload, trace, window)


def result_of(server: SimServer, workload: SimWorkload, trace: Trace, window: np.ndarray) -> SimResult:
    """The level's summary over the requests of `window` (trace indices), as the client saw them."""
    outputs = trace.output[window]
    sends, ends = trace.client_send[window], (trace.client_send + trace.client_e2e())[window]
    duration = max(float(ends.max() - sends.min()), 1e-12)
    if workload.duration_s is not None:
        duration = workload.duration_s
    offered = ({"concurrency": workload.concurrency} if workload.concurrency else
               {"rate_rps": workload.rate_rps} if workload.rate_rps else {"trace_requests": len(workload.arrival_times)})
    metrics = _metrics(trace.client_ttft()[window], trace.client_e2e()[window], outputs, trace.client_ttfa()[window])
    engine = _metrics((trace.first_token - trace.arrival)[window], (trace.end - trace.arrival)[window], outputs,
                      (trace.first_answer - trace.arrival)[window])
    return SimResult(
        strategy=server.strategy, offered=offered, requests=len(window), duration_s=duration,
        request_rate_rps=len(window) / duration, output_tokens_per_s=float(outputs.sum()) / duration,
        mean_batch_size=trace.sequences_in_steps / max(trace.steps, 1),
        utilization=min(1.0, trace.busy_s / float(np.nanmax(trace.end))),
        metrics=metrics, steps=trace.steps, preemptions=trace.preemptions, engine_metrics=engine,
    )


def simulate_levels(server: SimServer, workload: SimWorkload, step_model: StepTimeModel, *,
                    concurrencies: list[int] | None = None, rates: list[float] | None = None,
                    mapper: Callable = map) -> list[SimResult]:
    """``simulate`` at each closed-loop concurrency or open-loop rate (same seed, same lengths). The levels
    are independent runs: `mapper` (e.g. a process pool's ``map``) may run them at once, in the same order."""
    if (concurrencies is None) == (rates is None):
        raise ValueError("give exactly one of concurrencies and rates")
    if concurrencies is not None:
        workloads = [replace(workload, concurrency=c, rate_rps=None) for c in concurrencies]
    else:
        workloads = [replace(workload, concurrency=None, rate_rps=r) for r in rates]
    return list(mapper(simulate, [server] * len(workloads), workloads, [step_model] * len(workloads)))
