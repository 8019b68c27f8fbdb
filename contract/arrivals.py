"""Open-loop arrival schedules: when each request is meant to be sent.

`--arrival` spec: `closed` (Locust's closed-loop users), `poisson` (exponential gaps),
`constant` (gaps of exactly 1/rate), `gamma:CV` (gamma gaps with coefficient of
variation CV: shape k = 1/CV^2, scale = 1/(rate k); CV=1 is Poisson, CV>1 burstier).

A schedule is a seeded, endless sequence of offsets (seconds from the schedule's start);
the first request goes at offset 0. Blocks are drawn from one numpy Generator, so
offset i is the same however the schedule is consumed. In distributed mode every
process builds the same schedule and sends the indices i with i % processes == index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np

ARRIVAL_KINDS = ("closed", "poisson", "constant", "gamma")
CONSTANT_CV2 = 1e-6   # a constant schedule's cv² for gamma gaps, which need one > 0: their spread is 0.1% of 1/rate
_BLOCK = 1024


@dataclass(frozen=True)
class ArrivalProcess:
    kind: str
    rate_rps: float | None = None  # None only for "closed"
    cv: float = 1.0                # gamma only

    def __post_init__(self) -> None:
        if self.kind not in ARRIVAL_KINDS:
            raise ValueError(f"arrival: kind must be one of {ARRIVAL_KINDS}, got {self.kind!r}")
        if self.kind == "closed":
            return
        if self.rate_rps is None or not math.isfinite(self.rate_rps) or self.rate_rps <= 0:
            raise ValueError(f"rate: open-loop arrival {self.kind!r} needs --rate > 0, got {self.rate_rps!r}")
        if self.kind == "gamma" and not (math.isfinite(self.cv) and self.cv > 0):
            raise ValueError(f"arrival: gamma CV must be > 0, got {self.cv!r}")

    @property
    def open_loop(self) -> bool:
        return self.kind != "closed"

    @property
    def cv2(self) -> float:
        """The gaps' squared coefficient of variation (variance / mean²), as the simulator's gamma gaps
        take it (`SimWorkload.arrival_cv2`): poisson 1, gamma CV², constant `CONSTANT_CV2`. ValueError for
        a closed loop, which has no gaps."""
        if not self.open_loop:
            raise ValueError("closed-loop arrivals have no gaps, so no cv²")
        return {"poisson": 1.0, "constant": CONSTANT_CV2}.get(self.kind, self.cv ** 2)

    def gaps(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n inter-arrival gaps in seconds."""
        if self.kind == "constant":
            return np.full(n, 1.0 / self.rate_rps)
        if self.kind == "poisson":
            return rng.exponential(1.0 / self.rate_rps, n)
        shape = 1.0 / (self.cv * self.cv)
        return rng.gamma(shape, 1.0 / (self.rate_rps * shape), n)

    def scipy_distribution(self) -> tuple[str, tuple[float, ...]]:
        """(name, args) of the gap distribution for scipy.stats.kstest."""
        if self.kind == "poisson":
            return "expon", (0.0, 1.0 / self.rate_rps)
        if self.kind == "gamma":
            shape = 1.0 / (self.cv * self.cv)
            return "gamma", (shape, 0.0, 1.0 / (self.rate_rps * shape))
        raise ValueError(f"arrival {self.kind!r} has no continuous gap distribution")


def parse_arrival(spec: str, rate_rps: float | None) -> ArrivalProcess:
    text = str(spec).strip().lower()
    kind, _, rest = text.partition(":")
    if kind == "gamma":
        if not rest:
            raise ValueError("--arrival: gamma needs a coefficient of variation, e.g. gamma:2.0")
        try:
            cv = float(rest)
        except ValueError:
            raise ValueError(f"--arrival: gamma CV {rest!r} is not a number") from None
        return ArrivalProcess("gamma", rate_rps, cv)
    if rest:
        raise ValueError(f"--arrival: {kind!r} takes no parameter, got {spec!r}")
    if kind not in ARRIVAL_KINDS:
        raise ValueError(f"--arrival: {spec!r} is not one of closed, poisson, constant, gamma:CV")
    return ArrivalProcess(kind, None if kind == "closed" else rate_rps)


def iter_offsets(process: ArrivalProcess, seed: int) -> Iterator[float]:
    """Endless offsets (s): 0, g0, g0+g1, ... from a Generator seeded with `seed`."""
    if not process.open_loop:
        raise ValueError("closed-loop arrivals have no schedule")
    rng = np.random.default_rng(seed)
    start = 0.0
    while True:
        gaps = process.gaps(rng, _BLOCK)
        offsets = start + np.concatenate(([0.0], np.cumsum(gaps[:-1])))
        yield from offsets.tolist()
        start = float(offsets[-1] + gaps[-1])


def schedule_offsets(process: ArrivalProcess, seed: int, n: int) -> np.ndarray:
    """The first n offsets of the schedule `iter_offsets` yields."""
    it = iter_offsets(process, seed)
    return np.fromiter((next(it) for _ in range(n)), dtype=float, count=n)


def my_share(index: int, process_index: int, process_count: int) -> bool:
    """Whether schedule slot `index` belongs to process `process_index` of `process_count`."""
    return index % process_count == process_index
