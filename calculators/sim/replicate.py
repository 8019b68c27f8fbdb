"""Replications: one load level simulated several times (seeds 0..R-1), each as long as the measured run.

A measured p99 of a few hundred requests is itself noisy, so a prediction is the distribution
of what one such run would measure:
    value    = median over replications of the replication's percentile
    interval = [2.5%, 97.5%] of those percentiles across replications (numpy's linear interpolation;
               with few replications, close to their minimum and maximum)
for p50, p95 and p99 of ttft_s, tpot_s, e2e_s and ttfa_s, plus the medians of the rates and batch size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from calculators.sim.front_end import FrontEnd
from calculators.sim.simulate import SimResult, SimServer, SimWorkload, simulate
from calculators.sim.step_model import StepTimeModel

METRICS = ("ttft_s", "tpot_s", "e2e_s", "ttfa_s")
QUANTILES = ("p50", "p95", "p99")
INTERVAL = (2.5, 97.5)


@dataclass(frozen=True)
class Replicated:
    """``metrics[metric][q]`` = {"value", "interval": [lo, hi]}; ``runs`` = the replications themselves."""

    replications: int
    metrics: dict
    request_rate_rps: float
    output_tokens_per_s: float
    mean_batch_size: float
    requests: float
    runs: tuple[SimResult, ...]

    def value(self, metric: str, q: str) -> float | None:
        return self.metrics[metric][q]["value"]

    def to_dict(self) -> dict:
        return {"replications": self.replications, "metrics": self.metrics, "request_rate_rps": self.request_rate_rps,
                "output_tokens_per_s": self.output_tokens_per_s, "mean_batch_size": self.mean_batch_size,
                "requests": self.requests}


def simulate_replicated(server: SimServer, workload: SimWorkload, step_model: StepTimeModel,
                        front_end: FrontEnd | None = None, *, replications: int = 8,
                        speeds: tuple[tuple[float, float], ...] = ()) -> Replicated:
    """``simulate`` with seeds workload.seed x 1000 + r, r = 0 .. replications - 1 (``speeds``: the
    machine's speed schedule, the same in every replication)."""
    if isinstance(replications, bool) or not isinstance(replications, int) or replications < 1:
        raise ValueError(f"replications must be a positive integer, got {replications!r}")
    runs = tuple(simulate(server, replace(workload, seed=workload.seed * 1000 + r), step_model, front_end,
                          speeds=speeds) for r in range(replications))
    metrics = {}
    for metric in METRICS:
        metrics[metric] = {}
        for q in QUANTILES:
            values = np.array([run.metrics[metric][q] for run in runs if run.metrics[metric][q] is not None])
            metrics[metric][q] = ({"value": None, "interval": None} if not len(values) else
                                  {"value": float(np.median(values)),
                                   "interval": [float(v) for v in np.percentile(values, INTERVAL)]})

    def median(field: str) -> float:
        return float(np.median([getattr(run, field) for run in runs]))

    return Replicated(replications, metrics, median("request_rate_rps"), median("output_tokens_per_s"),
                      median("mean_batch_size"), median("requests"), runs)
