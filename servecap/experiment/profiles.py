"""Load profiles: what level to measure next, from what the last one measured.

A profile is a generator: it yields the next `Level` to measure and is sent back what that level
measured (`LevelStats`), so a fixed plan, a search and a sweep are each a few lines behind one seam
(GuideLLM's `Profile.next_strategy`, here in generator form). The runner owns every process and
file; a profile decides only. Pure: no I/O, so each is tested step by step without a server.

    FixedLevels    --concurrency / --rates: every level, in --rounds rounds, serpentine
    KneeSearch     --auto: ramp 1, 2, 4, ... users until a level misses the SLO, then bisect between
                   the last that met it and the first that did not, until adjacent or within 12.5%;
                   every level tried at or below the answer met the SLO and every one above missed, so
                   the report's verdict (which walks the levels upward by the same rule) names the same
    RateSweep      --rate-sweep N: GuideLLM's sweep: the synchronous rate (one user), saturation (as
                   many users as the search may use), then N - 2 open-loop rates evenly spaced from
                   the first to the second (numpy.linspace(sync, saturation, N - 1)[1:])
    TraceReplay    a workload's --trace: one level, the trace's own times

What a profile returns when it is done (`ProfileOutcome`) goes into run.json (the knee, the
sweep's rates).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

import numpy as np

from contract.level_windows import serpentine
from contract.slo import SLO

BISECT_UNTIL = 0.125  # stop bisecting when the gap is this fraction of the good level


@dataclass(frozen=True)
class Level:
    """One level to measure: `load` users (closed loop) or requests/s (open loop).

    round: which of its rounds (None without rounds); window: (warm-up, measured) seconds when not
    the plan's own (a trace's replay); trace: the level replays the workload's trace."""

    load: float
    open_loop: bool = False
    round: int | None = None
    window: tuple[float, float] | None = None
    trace: bool = False


@dataclass(frozen=True)
class ProfileOutcome:
    """What a search found: the knee (most users meeting the SLO, first failing), a sweep's rates."""

    max_meeting_slo: int | None = None
    first_failing: int | None = None
    rates: tuple[float, ...] = ()
    notes: tuple[str, ...] = field(default=())


Steps = Generator[Level, "object", ProfileOutcome | None]


def drive(steps: Steps, measure: Callable[[Level], object]) -> ProfileOutcome | None:
    """A profile's levels, each measured by `measure` and its result sent back, until the profile is done;
    what it found (the runner measures for real; a test, with made-up results)."""
    try:
        level = next(steps)
        while True:
            level = steps.send(measure(level))
    except StopIteration as done:
        return done.value


class FixedLevels:
    """Every level as given, in `rounds` rounds, serpentine (contract.level_windows)."""

    def __init__(self, loads: tuple[float, ...], open_loop: bool, rounds: int = 1) -> None:
        self.loads, self.open_loop, self.rounds = tuple(loads), open_loop, rounds

    def planned(self) -> list[Level]:
        return [Level(load, self.open_loop) for load in self.loads]

    def steps(self) -> Steps:
        for round_index in range(self.rounds):
            for load in serpentine(self.loads, round_index):
                yield Level(load, self.open_loop, round_index if self.rounds > 1 else None)
        return None


class KneeSearch:
    """The most users that meet the SLO (module docstring); each level's stats judge themselves."""

    def __init__(self, slo: SLO, max_concurrency: int) -> None:
        if not slo.is_set:
            raise ValueError("--auto needs at least one SLO (--slo-ttft-ms, --slo-tpot-ms, --slo-e2e-ms or "
                             "--slo-ttfa-ms)")
        self.slo, self.max_concurrency = slo, max_concurrency

    def planned(self) -> list[Level]:
        return []   # each level depends on the last

    def steps(self) -> Steps:
        good, bad, load = 0, None, 1
        while load <= self.max_concurrency:
            stats = yield Level(load)
            if stats.check(self.slo).meets:
                good, load = load, load * 2
            else:
                bad = load
                break
        while bad is not None and bad - good > 1 and (good == 0 or (bad - good) / good > BISECT_UNTIL):
            mid = (good + bad) // 2
            stats = yield Level(mid)
            if stats.check(self.slo).meets:
                good = mid
            else:
                bad = mid
        return ProfileOutcome(max_meeting_slo=good or None, first_failing=bad)


class RateSweep:
    """GuideLLM's sweep (module docstring): `levels` levels in all, the first two closed-loop probes."""

    def __init__(self, levels: int, max_concurrency: int) -> None:
        if levels < 2:
            raise ValueError(f"--rate-sweep needs at least 2 levels, got {levels}")
        self.levels, self.max_concurrency = levels, max_concurrency

    def planned(self) -> list[Level]:
        return [Level(1), Level(self.max_concurrency)]

    def steps(self) -> Steps:
        synchronous = yield Level(1)
        saturated = yield Level(self.max_concurrency)
        low, high = synchronous.request_rate_rps, saturated.request_rate_rps
        if not low or not high:
            return ProfileOutcome(notes=("no request succeeded at the synchronous or the saturating level: "
                                         "no rates to sweep",))
        high = max(high, low)
        rates = tuple(round(float(rate), 4) for rate in np.linspace(low, high, self.levels - 1)[1:])
        for rate in rates:
            yield Level(rate, open_loop=True)
        return ProfileOutcome(rates=rates)


class TraceReplay:
    """One level: the trace at its own times (`mean_rps` its load, `window` its warm-up and replay)."""

    def __init__(self, mean_rps: float, window: tuple[float, float]) -> None:
        self.mean_rps, self.window = mean_rps, window

    def planned(self) -> list[Level]:
        return [Level(self.mean_rps, open_loop=True, window=self.window, trace=True)]

    def steps(self) -> Steps:
        yield self.planned()[0]
        return None
