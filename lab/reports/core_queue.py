"""The front end as one FIFO server on core 0, replayed on a run's own engine events.

On this project's 2-core machines the HTTP front end shares core 0 with the load generator
(``servecap.experiment.cpu_pinning``), so a request's front-end delays (``calculators.sim.front_end``)
may be its wait behind the core's other work. This module asks how much: every event the core
handles is a job, taken in arrival order:

    kind      arrives at                       work                           its completion is
    SEND      the client's send                w_send                          the engine's arrival (in_s)
    STEP      the end of an engine step        w_step + w_token x sequences    (background: a step's message
                                                                                and its chunks, both sides)
    FIRST     the request's first token        w_first                         the client's first token (first_out_s)
    LAST      the request's last token         w_last                          the client's last byte (last_out_s)

Completion of job k (Lindley): c_k = max(a_k, c_{k-1}) + w_k, which unrolls to a closed form
    c = S + cummax(a - S + w),   S = cumsum(w)
so a replay of 300,000 jobs is a few numpy passes. Jobs at one instant go in the order of the
table (a step's message before the first token it carries). Pure: arrays in, arrays out.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass

import numpy as np

SEND, STEP, FIRST, LAST = range(4)
DELAY_KINDS = (SEND, FIRST, LAST)   # the jobs whose completion is a request's delay, in DELAYS order


@dataclass(frozen=True)
class CoreWork:
    """Seconds of core-0 work per job (see the module's table)."""

    send_s: float
    first_s: float
    last_s: float
    step_s: float
    token_s: float

    def __post_init__(self) -> None:
        if any(not (np.isfinite(v) and v >= 0) for v in astuple(self)):
            raise ValueError(f"core work must be finite and >= 0, got {self}")


@dataclass(frozen=True)
class CoreJobs:
    """A run's jobs in the core's order. Arrays [J]: ``time`` (s), ``kind`` (SEND..LAST), ``sequences``
    (STEP: sequences in the step; else 0), ``request`` (SEND/FIRST/LAST: the request's index; STEP: -1);
    ``requests`` = how many requests."""

    time: np.ndarray
    kind: np.ndarray
    sequences: np.ndarray
    request: np.ndarray
    requests: int


def core_jobs(send, first_token, finish, step_end, step_sequences) -> CoreJobs:
    """Jobs from per-request times [n] (client send, engine first token, engine finish; one clock)
    and per-step [m] end times and sequence counts."""
    send, first_token, finish = (np.asarray(a, dtype=float) for a in (send, first_token, finish))
    step_end, step_sequences = np.asarray(step_end, dtype=float), np.asarray(step_sequences, dtype=float)
    n, m = len(send), len(step_end)
    if not (len(first_token) == len(finish) == n and len(step_sequences) == m):
        raise ValueError("core_jobs needs send, first_token, finish of one length and one sequence count per step")
    time = np.concatenate([send, step_end, first_token, finish])
    if not np.all(np.isfinite(time)):
        raise ValueError("core_jobs needs finite times")
    kind = np.repeat([SEND, STEP, FIRST, LAST], [n, m, n, n])
    sequences = np.concatenate([np.zeros(n), step_sequences, np.zeros(2 * n)])
    request = np.concatenate([np.arange(n), np.full(m, -1), np.arange(n), np.arange(n)])
    order = np.lexsort((kind, time))
    return CoreJobs(time[order], kind[order], sequences[order], request[order], n)


def fifo_completions(arrival: np.ndarray, work: np.ndarray) -> np.ndarray:
    """[J] completion times of jobs served one at a time in the given (arrival-sorted) order."""
    origin = arrival[0] if len(arrival) else 0.0   # epoch seconds: keep the sums' precision
    total = np.cumsum(work)
    return origin + total + np.maximum.accumulate(arrival - origin - total + work)


def replay(jobs: CoreJobs, work: CoreWork) -> np.ndarray:
    """[3, n] each request's (in_s, first_out_s, last_out_s) as the core's wait plus its own work."""
    per_kind = np.array([work.send_s, 0.0, work.first_s, work.last_s])
    job_work = per_kind[jobs.kind] + np.where(jobs.kind == STEP, work.step_s + work.token_s * jobs.sequences, 0.0)
    done = fifo_completions(jobs.time, job_work)
    delays = np.full((3, jobs.requests), np.nan)
    for row, kind in enumerate(DELAY_KINDS):
        mine = jobs.kind == kind
        delays[row, jobs.request[mine]] = done[mine] - jobs.time[mine]
    return delays


def fit_work(jobs: CoreJobs, measured: np.ndarray, groups: list[np.ndarray]) -> CoreWork:
    """The work that makes the replay's mean delays match the measured ones: least squares on log means,
    each of the three delays in each group (a level: a boolean mask over the requests, [n]).
    measured: [3, n] (in_s, first_out_s, last_out_s). Starts from 80% of the first group's means
    (its delays, uncontended, are mostly work) and a small step cost."""
    from scipy import optimize   # scipy only where work is fitted

    targets = np.array([[measured[row][g].mean() for g in groups] for row in range(3)])
    if not np.all(targets > 0):
        raise ValueError("every group needs positive mean delays to fit the core's work")

    def residuals(log_work: np.ndarray) -> np.ndarray:
        delays = replay(jobs, CoreWork(*np.exp(log_work)))
        means = np.array([[delays[row][g].mean() for g in groups] for row in range(3)])
        return (np.log(means) - np.log(targets)).ravel()

    start = np.log([*(0.8 * targets[:, 0]), 1e-4, 1e-5])
    fit = optimize.least_squares(residuals, start, diff_step=0.05)
    return CoreWork(*(float(v) for v in np.exp(fit.x)))
