"""When disaggregation pays: per prompt/output length pair, the most requests a second a GPU each topology
sustains at the SLO, the winner, its gain, and how sure that answer is.

    cells = crossover(meets, topologies, [(200, 2000), (8000, 200)], start_rps=1.0, precision=0.05)
    cells[0].winner, cells[0].gain, cells[0].gain_range, cells[0].settled

`meets(topology, prompt, output, rate_rps) -> bool` is the judge of one open-loop level (the caller's
simulation and SLO). The most a topology sustains is searched, not read off a grid of rates a user would
have to guess per length: from `start_rps` the rate doubles while the level meets the SLO (or halves while
it does not) until one meets and the next misses, then the bracket is halved geometrically until its
ends are within `precision` of each other. This is the report's rule (the last level that meets before
the first that does not) on rates fine enough to tell the topologies apart; like it, it takes the
judgement to be monotone in the rate.

How sure: the true most-sustained rate lies in the bracket [meets, misses), so the gain per GPU lies in
[winner's low / other's high, winner's high / other's low] - 1. The winner is settled when that range
is above zero (the winner's highest rate that met beats every rate the other could still sustain);
otherwise the two are within the search's precision of each other, a tie at that precision. The search
is on one seeded draw of arrivals per level; a finer precision does not remove that draw's own noise.
Pure: the judge does the work.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

FLOOR_RPS = 1e-3     # below this a topology is said to sustain nothing (a cell it cannot serve at all)
CEILING_RPS = 1e5    # above this the search stops doubling (a judge that always says yes)


@dataclass(frozen=True)
class Sustained:
    """A topology's most-sustained rate on a cell, bracketed: `low_rps` met the SLO (0: nothing down to the
    floor did), `high_rps` did not (inf: nothing up to the ceiling failed)."""

    topology: str
    gpus: int
    low_rps: float
    high_rps: float
    evaluations: int

    @property
    def per_gpu(self) -> float:
        return self.low_rps / self.gpus

    @property
    def high_per_gpu(self) -> float:
        return self.high_rps / self.gpus


def sustained_rate(meets: Callable[[float], bool], start_rps: float, precision: float = 0.05,
                   floor_rps: float = FLOOR_RPS, ceiling_rps: float = CEILING_RPS) -> tuple[float, float, int]:
    """(the highest rate found to meet, the lowest found to miss, the judge's calls): module docstring."""
    if not (start_rps > 0 and math.isfinite(start_rps)):
        raise ValueError(f"the search's start rate must be a finite rate > 0, got {start_rps!r}")
    if not 0 < precision < 1:
        raise ValueError(f"the search's precision must be between 0 and 1, got {precision!r}")
    low, high, calls, rate = 0.0, math.inf, 0, start_rps
    while True:   # bracket: one rate that meets and one above it that does not
        calls += 1
        if meets(rate):
            low = rate
            if high < math.inf or rate >= ceiling_rps:
                break
            rate *= 2
        else:
            high = rate
            if low > 0 or rate <= floor_rps:
                break
            rate /= 2
    while low > 0 and high < math.inf and high / low - 1 > precision:
        middle = math.sqrt(low * high)
        calls += 1
        if meets(middle):
            low = middle
        else:
            high = middle
    return low, high, calls


@dataclass(frozen=True)
class Cell:
    """One prompt/output pair: each topology's bracket, the winner (the most req/s a GPU at the SLO; None if
    none met it), its gain over the runner-up per GPU and that gain's range, and whether it is settled."""

    prompt_tokens: int
    output_tokens: int
    sustained: tuple[Sustained, ...]
    winner: str | None
    runner_up: str | None
    gain: float | None
    gain_range: tuple[float, float] | None
    settled: bool

    def to_dict(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
                "sustained": [{"topology": s.topology, "gpus": s.gpus, "low_rps": s.low_rps,
                               "high_rps": None if math.isinf(s.high_rps) else s.high_rps,
                               "low_rps_per_gpu": s.per_gpu, "evaluations": s.evaluations} for s in self.sustained],
                "winner": self.winner, "runner_up": self.runner_up, "gain": self.gain,
                "gain_range": None if self.gain_range is None else list(self.gain_range), "settled": self.settled}


def judge_cell(prompt: int, output: int, sustained: Sequence[Sustained]) -> Cell:
    """The winner and its gain over the runner-up on one cell (module docstring's rule)."""
    ranked = sorted(sustained, key=lambda s: s.per_gpu, reverse=True)
    top = ranked[0]
    if top.low_rps == 0:
        return Cell(prompt, output, tuple(sustained), None, None, None, None, False)
    if len(ranked) == 1:
        return Cell(prompt, output, tuple(sustained), top.topology, None, None, None, True)
    other = ranked[1]
    if other.low_rps == 0:   # the other sustains nothing the search could find: no finite gain
        return Cell(prompt, output, tuple(sustained), top.topology, other.topology, math.inf, (math.inf, math.inf),
                    True)
    gain = top.per_gpu / other.per_gpu - 1
    lowest = top.per_gpu / other.high_per_gpu - 1
    highest = top.high_per_gpu / other.per_gpu - 1
    return Cell(prompt, output, tuple(sustained), top.topology, other.topology, gain, (lowest, highest), lowest > 0)


def crossover(meets: Callable[[str, int, int, float], bool], topologies: Sequence[tuple[str, int]],
              cells: Sequence[tuple[int, int]], start_rps: float = 1.0, precision: float = 0.05,
              on_cell: Callable[[Cell], None] | None = None) -> list[Cell]:
    """Every (prompt, output) cell judged over `topologies` ((name, GPUs) pairs); `on_cell` hears of each."""
    if not topologies:
        raise ValueError("the crossover needs at least one topology")
    answers = []
    for prompt, output in cells:
        found = []
        for name, gpus in topologies:
            low, high, calls = sustained_rate(lambda rate: meets(name, prompt, output, rate), start_rps * gpus,
                                              precision)
            found.append(Sustained(name, gpus, low, high, calls))
        cell = judge_cell(prompt, output, found)
        answers.append(cell)
        if on_cell is not None:
            on_cell(cell)
    return answers


def parse_cells(text: str) -> list[tuple[int, int]]:
    """`--crossover PROMPTS/OUTPUTS` (e.g. 200,2000,8000/200,2000): every prompt with every output."""
    parts = text.split("/")
    if len(parts) != 2:
        raise ValueError(f"--crossover {text!r}: give PROMPTS/OUTPUTS, e.g. 200,2000,8000/200,2000")
    lists = []
    for side, part in zip(("prompt", "output"), parts):
        try:
            values = [int(v) for v in part.split(",") if v.strip()]
        except ValueError:
            raise ValueError(f"--crossover {text!r}: {side} lengths must be whole token counts") from None
        if not values or any(v < 1 for v in values):
            raise ValueError(f"--crossover {text!r}: give at least one {side} length, each at least 1 token")
        lists.append(values)
    return [(p, o) for p in lists[0] for o in lists[1]]
