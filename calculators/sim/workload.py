"""What the simulator is fed: length distributions, the arrival process, the server's limits."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from reference_server.scheduling.strategies import Limits, limits_from_flags, resolve  # the pure registry
from reference_server.scheduling.strategies.limits import check_positive_int

# The last measured lengths checked, and their [n, 2] array: a calibration's workload is rebuilt for every
# replication (dataclasses.replace, one per seed) with the same tuple, which a 1,000,000-record run makes
# 1,000,000 pairs long; checked and converted once instead of 36 times (12 s of its report).
# Tuples are immutable, so the same object holds the same pairs.
_CHECKED: list = [None, None]


@dataclass(frozen=True)
class LengthDist:
    """Token counts: uniform integers in [low, high] (fixed when equal), or drawn from ``values``
    (with replacement; or, with ``in_order``, taken in order and cycled: replays a measured workload)."""

    low: int = 128
    high: int = 128
    values: tuple[int, ...] = ()
    in_order: bool = False

    def __post_init__(self) -> None:
        if self.in_order and not self.values:
            raise ValueError("in_order needs values")
        if self.values:
            if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0 for v in self.values):
                raise ValueError("length values must be positive integers")
            object.__setattr__(self, "values", tuple(int(v) for v in self.values))
            return
        for name in ("low", "high"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(f"length {name} must be a positive integer, got {value!r}")
        if self.high < self.low:
            raise ValueError(f"length high ({self.high}) must be >= low ({self.low})")

    @classmethod
    def fixed(cls, tokens: int) -> "LengthDist":
        return cls(tokens, tokens)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.values and self.in_order:
            return np.resize(np.asarray(self.values, dtype=np.int64), n)
        if self.values:
            return rng.choice(np.asarray(self.values, dtype=np.int64), size=n)
        return rng.integers(self.low, self.high + 1, size=n, dtype=np.int64)

    @property
    def mean(self) -> float:
        return float(np.mean(self.values)) if self.values else (self.low + self.high) / 2


@dataclass(frozen=True)
class Workload:
    """Requests and how they arrive: closed loop (``concurrency`` users, no think time), open loop
    (``rate_rps``; Poisson when ``arrival_cv2`` = 1, gamma inter-arrival times otherwise, near-constant
    gaps as it goes to 0) or a trace (``arrival_times``: send offsets in s, replayed; the run has
    that many requests).

    Lengths: ``prompt_tokens`` and ``output_tokens`` drawn apart, or ``lengths``: measured
    (prompt, output) pairs drawn together with replacement (a run's own workload).

    The measure window: by count, ``warmup_fraction`` of the first requests are left out, and in
    closed loop so are the last ``concurrency`` (the tail where fewer users remain); or by time,
    as a load test has it, with ``warmup_s`` and ``duration_s``: requests sent in
    [warmup_s, warmup_s + duration_s) that finished by its end (the run stops there, and
    ``requests`` is only the first guess of how many that takes).
    """

    prompt_tokens: LengthDist = field(default_factory=LengthDist)
    output_tokens: LengthDist = field(default_factory=LengthDist)
    requests: int = 1000
    concurrency: int | None = None
    rate_rps: float | None = None
    arrival_cv2: float = 1.0
    warmup_fraction: float = 0.1
    seed: int = 0
    lengths: tuple[tuple[int, int], ...] = ()
    arrival_times: tuple[float, ...] = ()
    warmup_s: float | None = None
    duration_s: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.requests, bool) or not isinstance(self.requests, int) or self.requests <= 0:
            raise ValueError(f"requests must be a positive integer, got {self.requests!r}")
        if sum((self.concurrency is not None, self.rate_rps is not None, bool(self.arrival_times))) != 1:
            raise ValueError("give exactly one of concurrency (closed loop), rate_rps (open loop) and arrival_times")
        if self.concurrency is not None and (isinstance(self.concurrency, bool)
                                             or not isinstance(self.concurrency, int) or self.concurrency <= 0):
            raise ValueError(f"concurrency must be a positive integer, got {self.concurrency!r}")
        if self.rate_rps is not None and not (isinstance(self.rate_rps, (int, float)) and self.rate_rps > 0):
            raise ValueError(f"rate_rps must be positive, got {self.rate_rps!r}")
        if not isinstance(self.arrival_cv2, (int, float)) or self.arrival_cv2 <= 0:
            raise ValueError(f"arrival_cv2 must be positive, got {self.arrival_cv2!r}")
        if not 0 <= self.warmup_fraction < 1:
            raise ValueError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        if self.lengths:
            if self.lengths is not _CHECKED[0]:
                pairs = tuple((int(p), int(o)) for p, o in self.lengths)
                if any(p <= 0 or o <= 0 for p, o in pairs):
                    raise ValueError("lengths must be (prompt, output) pairs of positive integers")
                _CHECKED[:] = [pairs, np.asarray(pairs, dtype=np.int64).reshape(-1, 2)]
            object.__setattr__(self, "lengths", _CHECKED[0])
        if self.arrival_times:
            times = np.asarray(self.arrival_times, dtype=float)
            if not np.all(np.isfinite(times)) or np.any(times < 0) or np.any(np.diff(times) < 0):
                raise ValueError("arrival_times must be non-negative, finite and sorted")
            object.__setattr__(self, "arrival_times", tuple(float(t) for t in times))
        if (self.warmup_s is None) != (self.duration_s is None):
            raise ValueError("give warmup_s and duration_s together (a time window) or neither")
        if self.duration_s is not None and not (self.warmup_s >= 0 and self.duration_s > 0):
            raise ValueError(f"the window needs warmup_s >= 0 and duration_s > 0, got {self.warmup_s}, {self.duration_s}")

    @property
    def request_count(self) -> int:
        return len(self.arrival_times) if self.arrival_times else self.requests

    @property
    def horizon_s(self) -> float:
        """End of the time window (the run stops there), or infinity when measuring by count."""
        return math.inf if self.duration_s is None else self.warmup_s + self.duration_s

    def sample_lengths(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(prompt, output) token counts [n] each."""
        if self.lengths:
            table = _CHECKED[1] if self.lengths is _CHECKED[0] else np.asarray(self.lengths, dtype=np.int64)
            pairs = table[rng.integers(0, len(self.lengths), size=n)]
            return pairs[:, 0].copy(), pairs[:, 1].copy()
        return self.prompt_tokens.sample(rng, n), self.output_tokens.sample(rng, n)

    def open_loop_arrivals(self, rng: np.random.Generator) -> np.ndarray:
        """Send times [requests] (s): the trace, or gamma inter-arrivals with mean 1/rate and cv^2 = arrival_cv2."""
        if self.arrival_times:
            return np.asarray(self.arrival_times)
        shape = 1 / self.arrival_cv2
        gaps = rng.gamma(shape, 1 / (self.rate_rps * shape), size=self.requests)
        return np.cumsum(gaps)


@dataclass(frozen=True)
class ServerConfig:
    """The batching strategy with its limits, as the engine has them, and the KV cache.

    ``limits`` is the strategy's ``Limits`` from ``reference_server.scheduling.strategies`` (the
    registry); ``strategy`` alone gets that strategy's defaults, neither means continuous.
    ``from_flags("static", batch_size=4)`` builds it from flat fields (the CLI's and run.json's shape).
    ``num_kv_blocks`` (None = as many as ``limits.max_running`` sequences of the longest request
    need): the simulated schedulers allocate blocks like the engine's, so a small cache limits
    admission and makes continuous batching preempt.
    """

    strategy: str | None = None
    limits: Limits | None = None
    num_kv_blocks: int | None = None
    block_size: int = 16

    def __post_init__(self) -> None:
        strategy, limits = resolve(self.strategy, self.limits)
        object.__setattr__(self, "strategy", strategy)
        object.__setattr__(self, "limits", limits)
        check_positive_int("block_size", self.block_size)
        check_positive_int("num_kv_blocks", self.num_kv_blocks, allow_none=True)

    @classmethod
    def from_flags(cls, strategy: str | None = None, *, num_kv_blocks: int | None = None, block_size: int = 16,
                   **limit_values) -> "ServerConfig":
        """Limits as flat fields of any registered strategy (others' are validated, then ignored)."""
        name, _ = resolve(strategy, None)
        return cls(strategy=name, limits=limits_from_flags(name, limit_values), num_kv_blocks=num_kv_blocks,
                   block_size=block_size)
