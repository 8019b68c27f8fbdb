"""The search space of `servecap tune` and its guided search (pure: the measurements come from a callback).

A space is a grid of `servecap serve` flag values, one axis per flag, each axis's values in the
order the user gave them (the first is where the search starts: for the classifier, the least
batching). A configuration is one value per axis.

The search is Triton Model Analyzer's quick mode in spirit: from the least batching, it walks along
one axis at a time (the delay, then the preferred sizes, then the instances, in the order given),
as far as each step raises the score, then on to the next axis; it passes over the axes again until
a pass finds nothing better, or the budget is spent. The score
prefers any configuration that meets the SLO (by its throughput) to any that does not (by how far
its p99 passed the limit), so the climb first walks toward feasibility, then up the throughput.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Axis:
    """One server flag and the values to try, e.g. Axis("--classifier-max-queue-delay-us", ("0", "500"))."""

    flag: str
    values: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.flag.startswith("--"):
            raise ValueError(f"an axis names a server flag (--...), got {self.flag!r}")
        if not self.values:
            raise ValueError(f"{self.flag}: an axis needs at least one value")
        if len(set(self.values)) != len(self.values):
            raise ValueError(f"{self.flag}: a value is listed twice")

    def args(self, index: int) -> str:
        """The flag with its index-th value ("" for the value none: the flag left out)."""
        value = self.values[index]
        return "" if value == "none" else f"{self.flag} {value}"


@dataclass(frozen=True)
class Measurement:
    """One configuration measured: its throughput (in `unit`), its p99 latencies (ms) and whether it met the SLO."""

    throughput: float | None
    unit: str
    p99_ms: dict[str, float | None]
    meets: bool
    excess: float = 0.0      # the worst p99 over its limit (ratio), when it does not meet it
    errors: int = 0
    run_dir: str | None = None
    reason: str | None = None
    level: str | None = None   # the load level these figures are from (the best under the SLO)

    @property
    def score(self) -> float:
        if self.throughput is None:
            return -math.inf
        return self.throughput if self.meets else -self.excess


@dataclass
class SearchResult:
    measured: dict[tuple[int, ...], Measurement] = field(default_factory=dict)   # in the order measured
    best: tuple[int, ...] | None = None

    @property
    def count(self) -> int:
        return len(self.measured)


def grid(axes: list[Axis]) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(len(axis.values)) for axis in axes)))


def server_args(axes: list[Axis], point: tuple[int, ...]) -> str:
    return " ".join(part for part in (axis.args(i) for axis, i in zip(axes, point)) if part)


def describe(axes: list[Axis], point: tuple[int, ...]) -> str:
    return ", ".join(f"{axis.flag.removeprefix('--')}={axis.values[i]}" for axis, i in zip(axes, point))


def neighbours(axes: list[Axis], point: tuple[int, ...]) -> list[tuple[int, ...]]:
    """One step along one axis, up before down, in axis order."""
    out = []
    for k, axis in enumerate(axes):
        for step in (1, -1):
            j = point[k] + step
            if 0 <= j < len(axis.values):
                out.append(point[:k] + (j,) + point[k + 1:])
    return out


def best_point(measured: dict[tuple[int, ...], Measurement]) -> tuple[int, ...] | None:
    return max(measured, key=lambda p: measured[p].score) if measured else None


def guided_search(axes: list[Axis], measure: Callable[[tuple[int, ...]], Measurement], budget: int) -> SearchResult:
    """Coordinate ascent from the first value of every axis; at most `budget` measurements.

    Each pass walks every axis in turn from the best point so far: a step up, and on while each step
    beats the best (else a step down, and on likewise). Passes repeat until one finds nothing better,
    or the budget is spent."""
    result = SearchResult()

    def take(point: tuple[int, ...]) -> Measurement | None:
        if point not in result.measured:
            if result.count >= budget:
                return None
            result.measured[point] = measure(point)
        return result.measured[point]

    best = tuple(0 for _ in axes)
    take(best)
    improved = True
    while improved and result.count < budget:
        improved = False
        for k, axis in enumerate(axes):
            for step in (1, -1):
                moved = False
                while 0 <= best[k] + step < len(axis.values):
                    point = best[:k] + (best[k] + step,) + best[k + 1:]
                    tried_before = point in result.measured
                    found = take(point)
                    if found is None or found.score <= result.measured[best].score:
                        break
                    best, moved, improved = point, True, improved or not tried_before
                if moved:
                    break   # this axis went up: no need to walk it down
    result.best = best_point(result.measured)
    return result


def exhaustive(axes: list[Axis], measure: Callable[[tuple[int, ...]], Measurement]) -> SearchResult:
    result = SearchResult()
    for point in grid(axes):
        result.measured[point] = measure(point)
    result.best = best_point(result.measured)
    return result


def pareto_front(measured: dict[tuple[int, ...], Measurement], latency: str) -> list[tuple[int, ...]]:
    """The measured points no other beats on both throughput (higher) and p99 `latency` (lower), by throughput."""
    points = [(p, m) for p, m in measured.items() if m.throughput is not None and m.p99_ms.get(latency) is not None]
    front = [p for p, m in points
             if not any(o.throughput >= m.throughput and o.p99_ms[latency] <= m.p99_ms[latency]
                        and (o.throughput > m.throughput or o.p99_ms[latency] < m.p99_ms[latency]) for _, o in points)]
    return sorted(front, key=lambda p: measured[p].throughput)
