"""What vLLM's router does with a failed attempt: retries with backoff, and a circuit breaker per worker.

    policy = RouterResilience()                       # vllm-router 0.1.17's defaults
    breaker = Breaker(policy); breaker.can_execute(t); breaker.record(success, t)
    delay = policy.backoff_s(attempt, rng)            # before attempt + 1

The rule is vllm-router's (its Rust core, shared with SGLang's router: `core/retry.rs`,
`core/circuit_breaker.rs`, `routers/http/router.rs` `route_typed_request`); the defaults are the 0.1.17
wheel's CLI (`router_args.py`), and the fleet passes these same values to the real router:
- Each attempt picks a worker with the policy among those whose breaker lets a request through (a
  closed or half-open circuit). None: the router answers 503 at once (no worker to charge).
- The attempt's outcome is recorded on that worker's breaker: success is a 2xx response head (a stream
  that starts is a success, whatever happens to it later); anything else is a failure.
- A retryable status (408, 429, 500, 502, 503, 504) is tried again, up to `retry_max_retries` attempts
  in all (1: none), after a backoff of `retry_initial_backoff_ms` x `retry_backoff_multiplier`^k for
  the k-th retry (k from 0), at most `retry_max_backoff_ms`, times a jitter factor drawn uniformly in
  [1 - `retry_jitter_factor`, 1 + `retry_jitter_factor`]. Another status, or the last attempt's, is the
  client's answer.
- A breaker opens after `cb_failure_threshold` consecutive failures while closed, or one failure while
  half-open; it is half-open once `cb_timeout_duration_secs` have passed since it opened (every
  request is let through then, as the router does), and closes after `cb_success_threshold`
  consecutive successes there. A success resets the failure count. (The router's
  `--cb-window-duration-secs` is in its config but its breaker does not read it, so it is not here.)
Pure: no I/O; the jitter's draws are the caller's generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from contract.options import option, parse_float, parse_int

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
CONTEXT_TOO_LONG = 400   # a replica's answer to a prompt and max_tokens past its context: the client's error
NO_WORKER_STATUS = 503   # every circuit open: the router's own answer


@dataclass(frozen=True)
class RouterResilience:
    """vllm-router's retry and circuit-breaker settings; the option fields are its own flags and defaults."""

    retry_max_retries: int = option(5, parse=parse_int,
                                    help="attempts per request, the first included (vllm-router's, default 5; 1: "
                                         "none)")
    retry_initial_backoff_ms: int = option(50, parse=parse_int, help="the first retry's backoff (default 50 ms)")
    retry_max_backoff_ms: int = option(30_000, parse=parse_int, help="the longest backoff (default 30000 ms)")
    retry_backoff_multiplier: float = option(1.5, parse=parse_float,
                                             help="each retry's backoff over the last (default 1.5)")
    retry_jitter_factor: float = option(0.2, parse=parse_float,
                                        help="a backoff is stretched or shrunk by up to this share (default 0.2)")
    cb_failure_threshold: int = option(10, parse=parse_int,
                                       help="consecutive failures that open a worker's circuit (default 10)")
    cb_success_threshold: int = option(3, parse=parse_int,
                                       help="consecutive successes that close a half-open circuit (default 3)")
    cb_timeout_duration_secs: int = option(60, parse=parse_int,
                                           help="seconds an open circuit waits before letting requests through "
                                                "again (half-open; default 60)")
    disable_circuit_breaker: bool = option(False, kind="switch", help="no circuit breaker (vllm-router's flag)")

    def __post_init__(self) -> None:
        for name in ("retry_max_retries", "cb_failure_threshold", "cb_success_threshold"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be a whole number >= 1, got {value!r}")
        for name in ("retry_initial_backoff_ms", "retry_max_backoff_ms", "cb_timeout_duration_secs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be a whole number >= 0, got {value!r}")
        if not (math.isfinite(self.retry_backoff_multiplier) and self.retry_backoff_multiplier >= 1):
            raise ValueError(f"--retry-backoff-multiplier must be >= 1, got {self.retry_backoff_multiplier!r}")
        if not 0 <= self.retry_jitter_factor <= 1:
            raise ValueError(f"--retry-jitter-factor must be in [0, 1], got {self.retry_jitter_factor!r}")

    def backoff_s(self, retry: int, rng: np.random.Generator) -> float:
        """Seconds before retry number `retry` + 1 (0: after the first attempt failed)."""
        delay_ms = min(float(self.retry_initial_backoff_ms) * self.retry_backoff_multiplier ** retry,
                       float(self.retry_max_backoff_ms))
        if self.retry_jitter_factor > 0:
            delay_ms = max(0.0, delay_ms + round(delay_ms * rng.uniform(-self.retry_jitter_factor,
                                                                         self.retry_jitter_factor)))
        return delay_ms / 1e3

    def router_flags(self) -> list[str]:
        """The same settings as vllm-router's command line."""
        flags = ["--retry-max-retries", str(self.retry_max_retries),
                 "--retry-initial-backoff-ms", str(self.retry_initial_backoff_ms),
                 "--retry-max-backoff-ms", str(self.retry_max_backoff_ms),
                 "--retry-backoff-multiplier", str(self.retry_backoff_multiplier),
                 "--retry-jitter-factor", str(self.retry_jitter_factor),
                 "--cb-failure-threshold", str(self.cb_failure_threshold),
                 "--cb-success-threshold", str(self.cb_success_threshold),
                 "--cb-timeout-duration-secs", str(self.cb_timeout_duration_secs)]
        return flags + (["--disable-circuit-breaker"] if self.disable_circuit_breaker else [])


CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


class Breaker:
    """One worker's circuit breaker (module docstring); `opened` counts its openings."""

    def __init__(self, policy: RouterResilience) -> None:
        self.policy = policy
        self.state = CLOSED
        self.changed_s = 0.0
        self.failures = 0
        self.successes = 0
        self.opened = 0

    def can_execute(self, t: float) -> bool:
        if self.policy.disable_circuit_breaker:
            return True
        if self.state == OPEN and t - self.changed_s >= self.policy.cb_timeout_duration_secs:
            self._to(HALF_OPEN, self.changed_s + self.policy.cb_timeout_duration_secs)
        return self.state != OPEN

    def record(self, success: bool, t: float) -> None:
        if self.policy.disable_circuit_breaker:
            return
        self.can_execute(t)   # an open circuit whose timeout passed is half-open now
        if success:
            self.failures = 0
            self.successes += 1
            if self.state == HALF_OPEN and self.successes >= self.policy.cb_success_threshold:
                self._to(CLOSED, t)
            return
        self.successes = 0
        self.failures += 1
        if (self.state == CLOSED and self.failures >= self.policy.cb_failure_threshold) or self.state == HALF_OPEN:
            self._to(OPEN, t)

    def _to(self, state: str, t: float) -> None:
        if state == self.state:
            return
        self.state, self.changed_s = state, t
        if state == OPEN:
            self.opened += 1
            self.successes = 0
        else:
            self.failures = self.successes = 0


@dataclass(frozen=True)
class ReplicaErrors:
    """An error burst on replica `replica` (its id, as `--kill T:ID` names one): over [start_s, end_s) of the
    fleet's time, that share `rate` of the attempts it is sent are answered `status` at once."""

    replica: int
    start_s: float
    end_s: float
    status: int
    rate: float

    def active(self, t: float) -> bool:
        return self.start_s <= t < self.end_s


class RouterAttempts:
    """The router's bookkeeping of attempts over one run of n requests: each replica's breaker, which
    circuits are not closed, what each attempt met (an error burst's status, a seeded draw), and what the
    router does after a failed one (a retry after its backoff, or the error as the client's answer).

        attempts = RouterAttempts(n, policy, bursts, seed)
        routable = attempts.routable(ready, t)               # empty: the router's own 503 (`failed`)
        status = attempts.attempt(i, rid, t)                  # None: the replica takes it
        retry_at = attempts.failed(i, attempt, status, t)     # None: request i is answered an error
    """

    def __init__(self, n: int, policy: RouterResilience, bursts: tuple[ReplicaErrors, ...] = (), seed: int = 0) -> None:
        self.policy, self.bursts = policy, tuple(bursts)
        self.breakers: dict[int, Breaker] = {}
        self.tripped: set[int] = set()            # replicas whose circuit is open or half-open
        self.errored = np.zeros(n, dtype=bool)    # answered an error after the router's last attempt
        self.counts = np.zeros(n, dtype=np.int64)  # attempts per request
        self.sent_to: dict[int, int] = {}         # replica -> attempts the router sent it
        self.failed_at: dict[int, int] = {}       # replica -> attempts it answered with an error
        self._error_draws = np.random.default_rng([seed, 5])
        self._jitter = np.random.default_rng([seed, 6])

    def add_replica(self, rid: int) -> None:
        self.breakers[rid] = Breaker(self.policy)

    def routable(self, ready: list[int], t: float) -> list[int]:
        """The ready replicas whose circuit lets a request through at t (all, while every circuit is closed)."""
        if not self.tripped:   # only an error burst opens a circuit
            return ready
        return [rid for rid in ready if rid not in self.tripped or self.breakers[rid].can_execute(t)]

    def attempt(self, i: int, rid: int, t: float) -> int | None:
        """Request i's attempt on replica rid at t: the status an error burst answers it with (recorded on
        the replica's breaker), or None when the replica takes it."""
        self.counts[i] += 1
        self.sent_to[rid] = self.sent_to.get(rid, 0) + 1
        if not self.bursts:   # without error bursts no attempt fails and every circuit stays closed
            return None
        status = self._injected(rid, t)
        breaker = self.breakers[rid]
        breaker.record(status is None, t)
        if breaker.state == CLOSED:
            self.tripped.discard(rid)
        else:
            self.tripped.add(rid)
        if status is not None:
            self.failed_at[rid] = self.failed_at.get(rid, 0) + 1
        return status

    def no_worker(self, i: int) -> int:
        """Request i found every circuit open: an attempt that reached no replica; the router's 503."""
        self.counts[i] += 1
        return NO_WORKER_STATUS

    def failed(self, i: int, attempt: int, status: int, t: float) -> float | None:
        """When the router tries request i again after its attempt `attempt` (from 0) failed with `status`;
        None: it answers the client that error (not retryable, or the last attempt)."""
        if status in RETRYABLE_STATUSES and attempt + 1 < self.policy.retry_max_retries:
            return t + self.policy.backoff_s(attempt, self._jitter)
        self.errored[i] = True
        return None

    def passed_on(self, i: int) -> None:
        """Request i's error answer went to a proxy that sent it on to another tier: not the client's error."""
        self.errored[i] = False

    def _injected(self, rid: int, t: float) -> int | None:
        for burst in self.bursts:
            if burst.replica == rid and burst.active(t) and self._error_draws.random() < burst.rate:
                return burst.status
        return None

    def summary(self) -> dict:
        """The run's router section: attempts, retries, errors, and per replica the attempts sent, failed and
        the times its circuit opened."""
        return {"attempts": int(self.counts.sum()), "retries": int((self.counts - 1).clip(min=0).sum()),
                "errored": int(self.errored.sum()),
                "sent_to": {f"r{rid}": n for rid, n in sorted(self.sent_to.items())},
                "failed_at": {f"r{rid}": n for rid, n in sorted(self.failed_at.items())},
                "breaker_opened": {f"r{rid}": b.opened for rid, b in sorted(self.breakers.items()) if b.opened}}
