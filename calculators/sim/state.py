"""The simulator's bookkeeping: per-request trace, the arrival process (with front-end delays), the step clock."""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass

import numpy as np

from calculators.sim.front_end import FrontEnd
from calculators.sim.step_model import StepTimeModel


@dataclass
class Trace:
    """Per-request times (s) filled in by a run; arrays of length = requests, in engine-arrival order.

    `arrival`, `first_token`, `end` are the engine's (its queue, its first and last token); the
    client's are `client_send`, `first_token + first_out` and `end + last_out` (all zero delays
    without a front end). Unfinished requests keep NaN.

    `reasoning`: how many of each request's output tokens a reasoning model spends before its answer
    (zeros: none); `first_answer`: the engine's time of token `reasoning + 1`, the answer's first (NaN
    while it has none: all of its output reasoned, or it did not get that far). The client has it
    `first_out` after the engine, as a first token: a token chunk's hop back, whichever it is.
    """

    prompt: np.ndarray
    output: np.ndarray
    arrival: np.ndarray
    first_token: np.ndarray
    end: np.ndarray
    client_send: np.ndarray | None = None
    first_out: np.ndarray | None = None
    last_out: np.ndarray | None = None
    steps: int = 0
    sequences_in_steps: int = 0   # sum over steps of sequences in the step
    busy_s: float = 0.0
    preemptions: int = 0          # running sequences sent back to the queue when KV blocks ran out
    lora: list | None = None      # each request's LoRA adapter (None: the base model), when the mix names any
    reasoning: np.ndarray | None = None
    first_answer: np.ndarray | None = None
    token_ids: list | None = None   # each request's prompt ids, where requests share prefixes (sessions:
                                    # calculators.sim.sessions); None: distinct prompts, request i's is i repeated
    cached: np.ndarray | None = None   # with token_ids: each request's prefix-cache hits (tokens) at its admission
    longest: int | None = None      # with token_ids: a bound on any request's prompt and output (sizes the cache)

    def __post_init__(self) -> None:
        n = len(self.prompt)
        for name in ("client_send", "first_out", "last_out"):
            if getattr(self, name) is None:
                setattr(self, name, np.zeros(n))
        if self.reasoning is None:
            self.reasoning = np.zeros(n, dtype=np.int64)
        if self.first_answer is None:
            self.first_answer = np.full(n, np.nan)

    def client_ttft(self) -> np.ndarray:
        return self.first_token + self.first_out - self.client_send

    def client_e2e(self) -> np.ndarray:
        return self.end + self.last_out - self.client_send

    def client_ttfa(self) -> np.ndarray:
        return self.first_answer + self.first_out - self.client_send


class Arrivals:
    """When requests reach the engine. Open loop: the client's sorted send schedule plus each request's
    in-delay. Closed loop: `concurrency` users send at 0, then each again `last_out + think` after the
    engine finished its request (plus the next request's in-delay). Each request carries one measured
    request's front-end delays (`FrontEnd.draw`).

    A closed-loop re-send never joins the step that starts as its user's last request finished, even
    with no front-end delay: an engine schedules its next step as soon as the last one ends, before
    that step's output has left the process, so no client can have answered it yet (vLLM's engine core
    and TensorRT-LLM's executor loop both schedule before they hand the outputs on). With zero delays
    it reaches the engine at that step's start and waits for the next. `FrontEnd.in_process()` is the
    exception: a caller that steps the engine itself adds the next request before the next step."""

    def __init__(self, trace: Trace, *, schedule: np.ndarray | None, concurrency: int | None,
                 front_end: FrontEnd | None = None, rng: np.random.Generator | None = None) -> None:
        self.trace = trace
        self.n = len(trace.prompt)
        self.sent = 0
        self.closed = concurrency is not None
        self.heap: list[tuple[float, float, int]] = []   # closed loop: (engine arrival, client send, draw)
        front = front_end or FrontEnd.none()
        self.think_s = front.think_s
        self.delays = front.draw(rng if rng is not None else np.random.default_rng(0), self.n)
        if self.closed:
            self.pushes = 0
            users = min(concurrency, self.n)
            # draws below this are the users' first sends, at 0; in process, every send may join the next step
            self.first_users = users if front.served else self.n
            for _ in range(users):
                self._push(0.0)
        else:
            in_s, first_out, last_out = np.asarray(self.delays) * front.burst_factors(schedule)
            reach = np.asarray(schedule, dtype=float) + in_s
            order = np.argsort(reach, kind="stable")
            trace.arrival[:], trace.client_send[:] = reach[order], np.asarray(schedule, dtype=float)[order]
            trace.first_out[:], trace.last_out[:] = first_out[order], last_out[order]

    def _push(self, client_send: float) -> None:
        draw = self.pushes
        self.pushes += 1
        heapq.heappush(self.heap, (client_send + float(self.delays[0][draw]), client_send, draw))

    def next_time(self) -> float | None:
        if self.sent >= self.n or (self.closed and not self.heap):
            return None   # closed loop with every user waiting on the server
        return self.heap[0][0] if self.closed else float(self.trace.arrival[self.sent])

    def pop_until(self, now: float, arrived: list[int]) -> None:
        """Append the requests (trace indices) that have arrived by `now` to `arrived`."""
        trace = self.trace
        while self.sent < self.n:
            if self.closed:
                if not self.heap or self.heap[0][0] > now or (self.heap[0][0] == now
                                                               and self.heap[0][2] >= self.first_users):
                    return   # not here yet, or a re-send meeting the step that starts as it is sent
                reach, send, draw = heapq.heappop(self.heap)
                i = self.sent
                trace.arrival[i], trace.client_send[i] = reach, send
                trace.first_out[i], trace.last_out[i] = self.delays[1][draw], self.delays[2][draw]
            elif trace.arrival[self.sent] > now:
                return
            arrived.append(self.sent)
            self.sent += 1

    def finished(self, i: int, when: float) -> None:
        """Request `i` left the engine at `when`: its closed-loop user sends again."""
        if self.closed and self.pushes < self.n:
            self._push(when + float(self.trace.last_out[i]) + self.think_s)


class StepClock:
    """Step durations: the model's mean, times a jitter factor drawn per step when the model has jitter,
    times the machine's speed at the step's start when a speed schedule is given.

    The factors are one seeded stream of 65,536, cycled (cheap per step, and the run reproducible):
    independent draws, or with ``jitter_block`` > 1 runs of that many consecutive measured factors
    from random places (a block bootstrap, which keeps slow steps together as they came).
    ``speeds``: ((from_s, factor), ...) ascending engine times, each factor holding until the next
    (before the first: 1); the engine sets ``now`` before each step (a run of steady steps at once
    takes the factor at its first step's start).
    With the model's ``slow_paths``, the machine's slow speed is one more factor: a seeded stream of
    bins of ``slow_bin_s`` built from whole measured paths drawn end to end (the first from a random
    bin), cycled; each step takes the bin it starts in (``decode_durations`` too, step by step).
    With the model's ``warm_up``, the k-th step after the engine last waited (``idle()``; the run starts
    idle) takes ``warm_up[k]`` too.
    """

    STREAM = 1 << 16
    SLOW_STREAM = 1 << 16   # bins: 4.5 hours of engine time at 0.25 s

    def __init__(self, model: StepTimeModel, rng: np.random.Generator,
                 speeds: tuple[tuple[float, float], ...] = ()) -> None:
        self.model = model
        stream = _factor_stream(model, rng, self.STREAM) if model.jitter else None
        self.factors = None if stream is None else stream.tolist()   # a list: the per-step read is cheapest
        self._stream = stream                                         # the same, for runs of steps at once
        self.next = 0
        self._slow = _slow_stream(model, rng, self.SLOW_STREAM) if model.slow_paths else None
        self._slow_list = None if self._slow is None else self._slow.tolist()
        self._speed_from = [float(t) for t, _ in speeds]
        self._speed = [float(f) for _, f in speeds]
        self.now = 0.0
        self._warm = list(model.warm_up)
        self.since_idle = 0   # steps since the engine last could run nothing

    def idle(self) -> None:
        """The engine could run nothing: its next step is the first after a wait."""
        self.since_idle = 0

    def speed(self) -> float:
        """The machine's factor at ``now`` (1 without a schedule)."""
        if not self._speed:
            return 1.0
        i = bisect.bisect_right(self._speed_from, self.now) - 1
        return self._speed[i] if i >= 0 else 1.0

    def step(self, sequences: int, prefill_tokens: int = 0, context_tokens: int = 0, extra_s: float = 0.0) -> float:
        """`extra_s`: what the model leaves out and the step still costs (speculative decoding's verification
        and draft: `calculators.sim.speculative_step`), under the same factors."""
        mean = self.model.step_s(sequences, prefill_tokens, context_tokens) + extra_s
        if self.since_idle < len(self._warm):
            mean *= self._warm[self.since_idle]
        self.since_idle += 1
        if self._speed:
            mean *= self.speed()
        if self._slow_list is not None:
            mean *= self._slow_at(self.now)
        if self.factors is None:
            return mean
        factor = self.factors[self.next]
        self.next = (self.next + 1) % len(self.factors)
        return mean * factor

    def decode_durations(self, sequences: int, first_context: int, steps: int) -> np.ndarray:
        """What the next `steps` calls step(sequences, 0, first_context + j x sequences) (j = 0, 1, ...)
        would return, float for float, without using up their factors (``consume`` does)."""
        m = self.model
        context = first_context + sequences * np.arange(steps, dtype=np.int64)
        durations = (m.batch_s(sequences) + m.per_prefill_token_s * 0) + m.per_context_token_s * context
        warm = self._warm[self.since_idle:self.since_idle + steps]
        if warm:   # the first steps after a wait, as step() multiplies them
            durations[:len(warm)] *= warm
        if self._speed:
            durations = durations * self.speed()
        factors = None
        if self.factors is not None:
            factors = self._stream[(self.next + np.arange(steps)) % len(self.factors)]
        if self._slow is not None:
            return self._slow_durations(durations, factors)
        return durations if factors is None else durations * factors

    def _slow_at(self, t: float) -> float:
        return self._slow_list[int(t / self.model.slow_bin_s) % len(self._slow_list)]

    def _slow_durations(self, means: np.ndarray, factors: np.ndarray | None) -> np.ndarray:
        """Steps one after another from ``now``, each x the slow bin it starts in (x its factor after,
        as ``step`` multiplies): the run is cut where a step starts in the next bin."""
        out = np.empty(len(means))
        t, j, width = self.now, 0, self.model.slow_bin_s
        while j < len(means):
            b = int(t / width)
            part = means[j:] * self._slow_list[b % len(self._slow_list)]
            if factors is not None:
                part = part * factors[j:]
            starts = np.add.accumulate(np.concatenate(([t], part)))[:-1]   # as the engine adds them
            k = max(int(np.searchsorted(starts, (b + 1) * width, side="left")), 1)
            while k < len(part) and int(starts[k] / width) == b:   # the boundary as _slow_at reads it
                k += 1
            while k > 1 and int(starts[k - 1] / width) != b:
                k -= 1
            out[j:j + k] = part[:k]
            t = float(starts[k - 1] + part[k - 1])
            j += k
        return out

    def consume(self, steps: int) -> None:
        self.since_idle += steps
        if self.factors is not None:
            self.next = (self.next + steps) % len(self.factors)


def _slow_stream(model: StepTimeModel, rng: np.random.Generator, size: int) -> np.ndarray:
    """[size] slow factors per bin: whole measured paths drawn with replacement, end to end, from a
    random bin of the first."""
    paths = [np.asarray(path) for path in model.slow_paths]
    first = paths[int(rng.integers(len(paths)))]
    parts = [first[int(rng.integers(len(first))):]]
    total = len(parts[0])
    while total < size:
        path = paths[int(rng.integers(len(paths)))]
        parts.append(path)
        total += len(path)
    return np.concatenate(parts)[:size]


def _factor_stream(model: StepTimeModel, rng: np.random.Generator, size: int) -> np.ndarray:
    measured = np.asarray(model.jitter)
    block = min(model.jitter_block, len(measured))
    if block == 1:
        return rng.choice(measured, size=size)
    starts = rng.integers(0, len(measured) - block + 1, size=-(-size // block))
    return measured[(starts[:, None] + np.arange(block)).ravel()[:size]]
