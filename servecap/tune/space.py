"""The search space of `servecap tune` and its guided search (pure: the measurements come from a callback).

A space is a grid of `servecap serve` flag values, one axis per flag, each axis's values in the
order the user gave them (the first is where the search starts: for the classifier, the least
batching). A configuration is one value per axis.

The search is Triton Model Analyzer's quick mode in spirit: from the least batching, it searches one
axis at a time (the queue delay, then the preferred sizes, the max batch size and the instances),
every value of that axis with the others held at the best point so far, and moves to the best; it
passes over the axes again while a pass moves the best point, until the budget is spent. The score
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
    """Coordinate search from the first value of every axis; at most `budget` measurements.

    Each pass takes the axes in turn and measures every value of the axis with the other axes held
    at the best point so far (a line search), then moves to the axis's best. Passes repeat while one
    moves the best point, until the budget is spent. A whole axis is measured, not walked until a
    step fails: a level that passes its SLO by a hair makes throughput jump between neighbours, and a
    walk stops at the first dip (docs/results.md, 2026-12-05, the first design)."""
    result = SearchResult()

    def take(point: tuple[int, ...]) -> bool:
        if point not in result.measured:
            if result.count >= budget:
                return False
            result.measured[point] = measure(point)
        return True

    best = tuple(0 for _ in axes)
    take(best)
    moved = True
    while moved and result.count < budget:
        moved = False
        for k, axis in enumerate(axes):
            line = [best[:k] + (j,) + best[k + 1:] for j in range(len(axis.values))]
            measured = [point for point in line if take(point)]
            champion = max(measured, key=lambda point: result.measured[point].score)
            if result.measured[champion].score > result.measured[best].score:
                best, moved = champion, True
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
