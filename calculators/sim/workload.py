"""What the simulator is fed: length distributions, the arrival process, the server's limits."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from contract.checks import non_negative_int, positive_int, positive_number
from calculators.sim.lora_step import LoraServing
from calculators.sim.speculative_step import SpeculativeStep
from contract.model_mix import ModelMix
from contract.distributions import LengthDistribution
from engine_core.scheduling.strategies import Limits, limits_from_flags, resolve  # the pure registry


def length_rows(rows) -> np.ndarray:
    """[n, 3] int64 (prompt, output, reasoning) from pairs, triples or nothing; pairs reason for 0 tokens."""
    table = np.asarray(rows, dtype=np.int64)
    if table.size == 0:
        return np.zeros((0, 3), dtype=np.int64)
    if table.ndim == 2 and table.shape[1] == 2:
        return np.column_stack([table, np.zeros(len(table), dtype=np.int64)])
    return table


class MeasuredLengths:
    """(prompt, output[, reasoning]) token counts measured together, kept as one [n, 3] int64 table,
    checked once: drawn together with replacement, or with ``in_order`` taken in order and cycled (a
    measured workload replayed request for request). ``reasoning``: how many of the output tokens a
    reasoning model spent reasoning before its answer (0 when pairs are given).

    A ``SimWorkload`` turns the rows it is given into one, and ``dataclasses.replace`` hands that on:
    a calibration's workload is rebuilt for every replication with the same rows, which a
    1,000,000-record run makes 1,000,000 long. Compared by identity.
    """

    __slots__ = ("table", "in_order")

    def __init__(self, pairs, *, in_order: bool = False) -> None:
        try:
            table = np.array(pairs, dtype=np.int64)
        except (TypeError, ValueError):
            table = None
        if (table is None or table.ndim != 2 or table.shape[1] not in (2, 3) or not len(table)
                or (table[:, :2] <= 0).any()):
            raise ValueError("lengths must be (prompt, output) pairs of positive integers, or (prompt, output, "
                             "reasoning) triples")
        table = length_rows(table)
        if ((table[:, 2] < 0) | (table[:, 2] > table[:, 1])).any():
            raise ValueError("reasoning tokens must be >= 0 and at most the output tokens they are part of")
        table.flags.writeable = False
        self.table: np.ndarray = table   # [n, 3]: prompt, output, reasoning
        self.in_order = in_order

    def __len__(self) -> int:
        return len(self.table)

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(prompt, output, reasoning) token counts [n] each."""
        rows = np.resize(np.arange(len(self.table)), n) if self.in_order else rng.integers(0, len(self.table), size=n)
        picked = self.table[rows]
        return picked[:, 0].copy(), picked[:, 1].copy(), picked[:, 2].copy()


@dataclass(frozen=True)
class SimWorkload:
    """Requests and how they arrive: closed loop (``concurrency`` users, no think time), open loop
    (``rate_rps``; Poisson when ``arrival_cv2`` = 1, gamma inter-arrival times otherwise, near-constant
    gaps as it goes to 0) or a trace (``arrival_times``: send offsets in s, replayed; the run has
    that many requests).

    Lengths: ``prompt_tokens`` and ``output_tokens`` drawn apart (``contract.distributions``, the
    load generator's syntax), or ``lengths``: measured (prompt, output[, reasoning]) rows drawn
    together (a run's own workload; ``MeasuredLengths``, which a tuple of rows is turned into).
    Reasoning: ``reasoning_tokens`` drawn apart (a reasoning model's `--reasoning-tokens`), each
    capped at its request's output tokens, as the server caps a budget at max_tokens; the output
    counts them, and the answer is the rest. Measured rows carry their own.

    The measure window: by count, ``warmup_fraction`` of the first requests are left out, and in
    closed loop so are the last ``concurrency`` (the tail where fewer users remain); or by time,
    as a load test has it, with ``warmup_s`` and ``duration_s``: requests sent in
    [warmup_s, warmup_s + duration_s) that finished by its end (the run stops there, and
    ``requests`` is only the first guess of how many that takes).
    """

    prompt_tokens: LengthDistribution = field(default_factory=lambda: LengthDistribution.fixed(128))
    output_tokens: LengthDistribution = field(default_factory=lambda: LengthDistribution.fixed(128))
    requests: int = 1000
    concurrency: int | None = None
    rate_rps: float | None = None
    arrival_cv2: float = 1.0
    warmup_fraction: float = 0.1
    seed: int = 0
    lengths: tuple[tuple[int, int], ...] | MeasuredLengths = ()
    arrival_times: tuple[float, ...] = ()
    warmup_s: float | None = None
    duration_s: float | None = None
    model_mix: ModelMix | None = None   # each request's LoRA adapter drawn from it ("base": none)
    reasoning_tokens: LengthDistribution | None = None   # drawn lengths only: of each output, the reasoning

    def __post_init__(self) -> None:
        positive_int("requests", self.requests)
        if sum((self.concurrency is not None, self.rate_rps is not None, bool(self.arrival_times))) != 1:
            raise ValueError("give exactly one of concurrency (closed loop), rate_rps (open loop) and arrival_times")
        positive_int("concurrency", self.concurrency, allow_none=True)
        if self.rate_rps is not None:
            positive_number("rate_rps", self.rate_rps)
        positive_number("arrival_cv2", self.arrival_cv2)
        if not 0 <= self.warmup_fraction < 1:
            raise ValueError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction!r}")
        non_negative_int("seed", self.seed)
        if len(self.lengths) and not isinstance(self.lengths, MeasuredLengths):
            object.__setattr__(self, "lengths", MeasuredLengths(self.lengths))
        if len(self.lengths) and self.reasoning_tokens is not None:
            raise ValueError("measured lengths carry their own reasoning tokens: give reasoning_tokens "
                             "only with drawn lengths")
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

    def sample_lengths(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(prompt, output, reasoning) token counts [n] each (reasoning: zeros for a model that does not)."""
        if self.lengths:
            return self.lengths.sample(rng, n)
        prompt, output = self.prompt_tokens.sample_array(rng, n), self.output_tokens.sample_array(rng, n)
        if self.reasoning_tokens is None:
            return prompt, output, np.zeros(n, dtype=np.int64)
        # a stream of its own, so a reasoning workload draws the same prompts and outputs as its plain twin
        reasoning = self.reasoning_tokens.sample_array(np.random.default_rng([self.seed, 3]), n)
        return prompt, output, np.minimum(reasoning, output)

    def open_loop_arrivals(self, rng: np.random.Generator) -> np.ndarray:
        """Send times [requests] (s): the trace, or gamma inter-arrivals with mean 1/rate and cv^2 = arrival_cv2."""
        if self.arrival_times:
            return np.asarray(self.arrival_times)
        shape = 1 / self.arrival_cv2
        gaps = rng.gamma(shape, 1 / (self.rate_rps * shape), size=self.requests)
        return np.cumsum(gaps)


@dataclass(frozen=True)
class SimServer:
    """The batching strategy with its limits, as the engine has them, and the KV cache.

    ``limits`` is the strategy's ``Limits`` from ``engine_core.scheduling.strategies`` (the
    registry); ``strategy`` alone gets that strategy's defaults, neither means continuous.
    ``from_flags("static", batch_size=4)`` builds it from flat fields (the CLI's and run.json's shape).
    ``num_kv_blocks`` (None = as many as ``limits.max_running`` sequences of the longest request
    need): the simulated schedulers allocate blocks like the engine's, so a small cache limits
    admission and makes continuous batching preempt. ``speculative``: speculative decoding, every
    decode proposing k, kept by seeded draws at the given acceptance (continuous only). ``lora``: LoRA
    adapters in ``max_loras`` slots and what they cost a step (``calculators.sim.lora_step``); the
    workload's ``model_mix`` says which adapter each request asks for.
    """

    strategy: str | None = None
    limits: Limits | None = None
    num_kv_blocks: int | None = None
    block_size: int = 16
    speculative: SpeculativeStep | None = None
    lora: LoraServing | None = None

    def __post_init__(self) -> None:
        strategy, limits = resolve(self.strategy, self.limits)
        if self.speculative is not None and strategy != "continuous":
            raise ValueError(f"speculative decoding runs with the continuous strategy, not {strategy!r}")
        if self.lora is not None and strategy != "continuous":
            raise ValueError(f"LoRA adapters are served with the continuous strategy, not {strategy!r}")
        object.__setattr__(self, "strategy", strategy)
        object.__setattr__(self, "limits", limits)
        positive_int("block_size", self.block_size)
        positive_int("num_kv_blocks", self.num_kv_blocks, allow_none=True)

    @classmethod
    def from_flags(cls, strategy: str | None = None, *, num_kv_blocks: int | None = None, block_size: int = 16,
                   speculative: SpeculativeStep | None = None, **limit_values) -> "SimServer":
        """Limits as flat fields of any registered strategy (others' are validated, then ignored)."""
        name, _ = resolve(strategy, None)
        return cls(strategy=name, limits=limits_from_flags(name, limit_values), num_kv_blocks=num_kv_blocks,
                   block_size=block_size, speculative=speculative)
