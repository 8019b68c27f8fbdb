"""What the simulator is fed: length distributions, the arrival process, the server's limits."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

STRATEGIES = ("none", "static", "dynamic", "continuous")


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
    """Requests and how they arrive: closed loop (``concurrency`` users, no think time) or open loop
    (``rate_rps``; Poisson when ``arrival_cv2`` = 1, gamma inter-arrival times otherwise).

    ``warmup_fraction`` of the first requests are left out of the statistics, and in closed loop so are
    the last ``concurrency`` (the tail where fewer users remain), like a load test's measure window.
    """

    prompt_tokens: LengthDist = field(default_factory=LengthDist)
    output_tokens: LengthDist = field(default_factory=LengthDist)
    requests: int = 1000
    concurrency: int | None = None
    rate_rps: float | None = None
    arrival_cv2: float = 1.0
    warmup_fraction: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.requests, bool) or not isinstance(self.requests, int) or self.requests <= 0:
            raise ValueError(f"requests must be a positive integer, got {self.requests!r}")
        if (self.concurrency is None) == (self.rate_rps is None):
            raise ValueError("give exactly one of concurrency (closed loop) and rate_rps (open loop)")
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

    def open_loop_arrivals(self, rng: np.random.Generator) -> np.ndarray:
        """Arrival times [requests] (s): gamma inter-arrivals with mean 1/rate and cv^2 = arrival_cv2."""
        shape = 1 / self.arrival_cv2
        gaps = rng.gamma(shape, 1 / (self.rate_rps * shape), size=self.requests)
        return np.cumsum(gaps)


@dataclass(frozen=True)
class ServerConfig:
    """The batching strategy and its limits; names and meanings follow ``reference_server.engine.config.EngineConfig``.

    ``num_kv_blocks`` (None = unlimited): a request is admitted only when blocks for its whole
    prompt + output are free (the run-to-completion strategies reserve exactly that; continuous
    batching in the engine allocates on demand and preempts, which this model does not).
    """

    strategy: str = "continuous"
    max_num_seqs: int = 32
    max_num_batched_tokens: int = 2048
    batch_size: int = 8
    batch_timeout_s: float = 0.05
    max_batch_size: int = 8
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_s: float = 0.001
    num_kv_blocks: int | None = None
    block_size: int = 16

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        for name in ("max_num_seqs", "max_num_batched_tokens", "batch_size", "max_batch_size", "block_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("batch_timeout_s", "max_queue_delay_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        if self.num_kv_blocks is not None and (not isinstance(self.num_kv_blocks, int) or self.num_kv_blocks <= 0):
            raise ValueError(f"num_kv_blocks must be a positive integer or None, got {self.num_kv_blocks!r}")
        if any(size <= 0 or size > self.max_batch_size for size in self.preferred_batch_sizes):
            raise ValueError("preferred_batch_sizes must lie in [1, max_batch_size]")
        object.__setattr__(self, "preferred_batch_sizes", tuple(sorted(set(self.preferred_batch_sizes))))
