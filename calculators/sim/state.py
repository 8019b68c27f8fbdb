"""The simulator's bookkeeping: per-request trace, the arrival process and the step clock."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from calculators.sim.step_model import StepTimeModel


@dataclass
class Trace:
    """Per-request times (s) filled in by a run; arrays of length = requests."""

    prompt: np.ndarray
    output: np.ndarray
    arrival: np.ndarray
    first_token: np.ndarray
    end: np.ndarray
    steps: int = 0
    sequences_in_steps: int = 0   # sum over steps of sequences in the step
    busy_s: float = 0.0
    preemptions: int = 0          # running sequences sent back to the queue when KV blocks ran out


class Arrivals:
    """Open loop: a fixed sorted schedule. Closed loop: users send again when a request finishes."""

    def __init__(self, trace: Trace, *, schedule: np.ndarray | None, concurrency: int | None) -> None:
        self.trace = trace
        self.n = len(trace.prompt)
        self.sent = 0
        self.closed = concurrency is not None
        self.heap: list[float] = []
        if self.closed:
            self.heap = [0.0] * min(concurrency, self.n)
        else:
            trace.arrival[:] = schedule

    def next_time(self) -> float | None:
        if self.sent >= self.n or (self.closed and not self.heap):
            return None   # closed loop with every user waiting on the server
        return self.heap[0] if self.closed else float(self.trace.arrival[self.sent])

    def pop_until(self, now: float, arrived: list[int]) -> None:
        """Append the requests (trace indices) that have arrived by `now` to `arrived`."""
        while self.sent < self.n:
            if self.closed:
                if not self.heap or self.heap[0] > now:
                    return
                self.trace.arrival[self.sent] = heapq.heappop(self.heap)
            elif self.trace.arrival[self.sent] > now:
                return
            arrived.append(self.sent)
            self.sent += 1

    def finished(self, when: float) -> None:
        if self.closed:
            heapq.heappush(self.heap, when)


class StepClock:
    """Step durations: the model's mean, times a jitter factor drawn per step when the model has jitter
    (a seeded draw of 65,536 factors, cycled: cheap per step, and the run stays reproducible)."""

    def __init__(self, model: StepTimeModel, rng: np.random.Generator) -> None:
        self.model = model
        self.factors = rng.choice(np.asarray(model.jitter), size=1 << 16).tolist() if model.jitter else None
        self.next = 0

    def step(self, sequences: int, prefill_tokens: int = 0, context_tokens: int = 0) -> float:
        mean = self.model.step_s(sequences, prefill_tokens, context_tokens)
        if self.factors is None:
            return mean
        factor = self.factors[self.next]
        self.next = (self.next + 1) % len(self.factors)
        return mean * factor
