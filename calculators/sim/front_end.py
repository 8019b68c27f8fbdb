"""What stands between the load generator's clock and the engine's: the front end, the network, the client.

Measured per request by joining the client's record with the engine's (`calculators.sim.calibrate.
fit_front_end`):
    in_s        client send -> the engine has it            (HTTP, parsing, tokenizing, the hop to the engine)
    first_out_s engine's first token -> the client has it   (the hop back, SSE framing, the client's read)
    last_out_s  engine's last token -> the client's last byte
    think_s     closed loop: the client's last byte -> its next send (the load generator's own work)
The simulator runs on the engine's clock and draws one measured request's (in, first_out, last_out)
per simulated request, so a slow hop keeps its measured company:
    client ttft = in + engine ttft + first_out;   client e2e = in + engine e2e + last_out
and a closed-loop user sends again `last_out + think` after the engine finished its request.

An open loop's bursts: a request sent while many others are in flight meets a busier front end
than the mean. With `burst` (from `FrontEndByLoad.at(..., burst_window_s=W)`), each open-loop
request's delays are scaled by the curve at its own streams in flight, counted as the sends in
the W seconds before it (itself included; W the mean E2E, so their mean is the streams'), over
the curve at the mean. A closed loop always has its users in flight and is not scaled.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from calculators.sim import front_end_curves as curves
from calculators.sim.front_end_curves import DELAYS

BURST_STREAMS_MAX = 4.0   # burst factors reach this many times the highest calibrated streams (then held)


@dataclass(frozen=True)
class FrontEnd:
    """Per-request delays (s), the three tuples of equal length (one entry per measured request)."""

    in_s: tuple[float, ...]
    first_out_s: tuple[float, ...]
    last_out_s: tuple[float, ...]
    think_s: float = 0.0
    burst: tuple[tuple[float, float, float, float], ...] = ()   # (streams, in, first_out, last_out factor), ascending
    burst_window_s: float = 0.0
    served: bool = True   # False: an in-process driver adds a closed loop's next request between two steps

    def __post_init__(self) -> None:
        lengths = {len(self.in_s), len(self.first_out_s), len(self.last_out_s)}
        if len(lengths) != 1 or not self.in_s:
            raise ValueError("front-end delays need in_s, first_out_s and last_out_s of one non-zero length")
        for name in ("in_s", "first_out_s", "last_out_s"):
            values = np.asarray(getattr(self, name), dtype=float)
            if not np.all(np.isfinite(values)) or np.any(values < 0):
                raise ValueError(f"front-end {name} must be finite and >= 0")
            object.__setattr__(self, name, tuple(float(v) for v in values))
        if not (isinstance(self.think_s, (int, float)) and self.think_s >= 0):
            raise ValueError(f"think_s must be >= 0, got {self.think_s!r}")
        burst = np.asarray(self.burst, dtype=float).reshape(-1, 4)
        if len(burst) and (not np.all(np.isfinite(burst)) or np.any(burst <= 0) or np.any(np.diff(burst[:, 0]) <= 0)
                           or not self.burst_window_s > 0):
            raise ValueError("burst needs ascending streams with positive factors, and burst_window_s > 0")
        object.__setattr__(self, "burst", tuple(tuple(float(v) for v in row) for row in burst))

    def burst_factors(self, schedule: np.ndarray) -> np.ndarray:
        """[3, n] factors for (in, first_out, last_out) of open-loop requests sent at `schedule` (sorted):
        the curve at each one's streams in flight (sends in the window before it) over the mean's."""
        sends = np.asarray(schedule, dtype=float)
        if not self.burst:
            return np.ones((3, len(sends)))
        streams = np.arange(1, len(sends) + 1) - np.searchsorted(sends, sends - self.burst_window_s, side="right")
        grid = np.asarray(self.burst)
        return np.stack([np.interp(streams, grid[:, 0], grid[:, k]) for k in (1, 2, 3)])

    @classmethod
    def none(cls) -> "FrontEnd":
        """No delays, the engine behind a server (a re-send still misses the step that starts as it is sent)."""
        return cls((0.0,), (0.0,), (0.0,))

    @classmethod
    def in_process(cls) -> "FrontEnd":
        """No front end at all: the caller steps the engine itself and adds the next request between steps."""
        return cls((0.0,), (0.0,), (0.0,), served=False)

    def draw(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(in, first_out, last_out) [n] each: n measured requests, drawn with replacement."""
        pick = rng.integers(0, len(self.in_s), size=n)
        return (np.asarray(self.in_s)[pick], np.asarray(self.first_out_s)[pick], np.asarray(self.last_out_s)[pick])

    @property
    def mean_s(self) -> dict[str, float]:
        return {"in_s": float(np.mean(self.in_s)), "first_out_s": float(np.mean(self.first_out_s)),
                "last_out_s": float(np.mean(self.last_out_s)), "think_s": self.think_s}


@dataclass(frozen=True)
class FrontEndByLoad:
    """Front-end delays measured at several loads, for any load.

    A load here is the streams a new request meets at the front end, itself included: a closed
    loop's users, an open loop's 1 + requests in flight (rate x mean E2E, Little's law;
    `reports.predict.evidence.LevelSample.streams`). Its work is per stream, so a closed-loop
    calibration answers for an open loop at the same streams.

    With three or more measured levels each delay's mean follows a fitted shape
    (`calculators.sim.front_end_curves`: a queue over the level's output tokens/s, or a power of the
    load, whichever predicts the calibration's own levels better when each is left out).
    ``at(load, tokens_per_s)`` keeps the joint draws of the measured level nearest in log(load) and
    scales each delay by curve(load) / curve(that level) (a delay measured as 0 at a level is fitted
    on the others; one measured as 0 everywhere stays 0: an external engine's split puts nothing on
    first_out_s). Without a fit (fewer levels, or it failed), or for the queue without a throughput,
    the means are interpolated piecewise linearly in log(load) instead (linear past the ends, never
    below half the nearest level's mean). Think time always follows log(load).
    """

    loads: tuple[float, ...]
    front_ends: tuple[FrontEnd, ...]
    tokens_per_s: tuple[float, ...] = ()
    _fit: tuple = field(default=(None, None), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.loads or len(self.loads) != len(self.front_ends) or any(not x > 0 for x in self.loads):
            raise ValueError("FrontEndByLoad needs one positive load per FrontEnd, at least one")
        if self.tokens_per_s and len(self.tokens_per_s) != len(self.loads):
            raise ValueError("tokens_per_s needs one value per load")
        order = np.argsort(self.loads)
        object.__setattr__(self, "loads", tuple(float(self.loads[i]) for i in order))
        object.__setattr__(self, "front_ends", tuple(self.front_ends[i] for i in order))
        if self.tokens_per_s:
            object.__setattr__(self, "tokens_per_s", tuple(float(self.tokens_per_s[i]) for i in order))
        means = {name: np.array([fe.mean_s[name] for fe in self.front_ends]) for name in DELAYS}
        object.__setattr__(self, "_fit", curves.choose(self.loads, self.tokens_per_s, means))

    @property
    def shape(self) -> str | None:
        """The fitted shape's name (`front_end_curves.QUEUE` or `.POWER`), or None (interpolated)."""
        return self._fit[0]

    @property
    def curve(self) -> dict | None:
        """The fitted curve (`front_end_curves.fit_queue`'s or `fit_power`'s), or None."""
        return self._fit[1]

    def at(self, load: float, tokens_per_s: float | None = None, *, burst_window_s: float = 0.0) -> FrontEnd:
        """The delays at `load` streams (and `tokens_per_s`); with `burst_window_s`, an open loop's
        burst factors too (FrontEnd.burst: the curve at 1 to BURST_STREAMS_MAX x the highest
        calibrated streams, over the curve at `load`)."""
        nearest = self._nearest(load)
        base = self.front_ends[nearest]
        if len(self.loads) == 1:
            return base
        factors = {name: self._ratio(name, nearest, load, tokens_per_s) for name in DELAYS}
        scaled = {name: tuple(v * factors[name] for v in getattr(base, name)) for name in DELAYS}
        burst: tuple = ()
        if burst_window_s > 0:
            grid = np.geomspace(1.0, BURST_STREAMS_MAX * max(self.loads[-1], load), 48)
            burst = tuple((float(n), *(self._ratio(name, nearest, float(n), None if tokens_per_s is None else
                                                   tokens_per_s * n / load) / factors[name]
                                       if factors[name] > 0 else 1.0 for name in DELAYS)) for n in grid)
        return FrontEnd(**scaled, think_s=self._follow("think_s", nearest, load), burst=burst,
                        burst_window_s=burst_window_s if burst else 0.0)

    def along(self, base: FrontEnd, there: tuple[float, float | None], here: tuple[float, float | None]) -> FrontEnd:
        """`base`, delays measured at `there` (streams, output tokens/s) under other arrivals, moved to
        `here` by this curve's ratio between the two points (its think time kept)."""
        if len(self.loads) == 1:
            return replace(base, burst=(), burst_window_s=0.0)
        k = self.nearest(there[0])
        factors = {}
        for name in DELAYS:
            at_there = self._ratio(name, k, *there)
            factors[name] = self._ratio(name, k, *here) / at_there if at_there > 0 else 1.0
        return FrontEnd(**{name: tuple(v * factors[name] for v in getattr(base, name)) for name in DELAYS},
                        think_s=base.think_s)

    def nearest(self, load: float) -> int:
        """The index of the measured level nearest `load` in log(load)."""
        return self._nearest(load)

    def _nearest(self, load: float) -> int:
        return int(np.argmin(np.abs(np.log(np.asarray(self.loads)) - np.log(load))))

    def _follow(self, name: str, nearest: int, load: float) -> float:
        """`name`'s mean at `load`, piecewise linear in log(load) (linear past the ends, never below half
        the nearest level's)."""
        x, target = np.log(np.asarray(self.loads)), float(np.log(load))
        values = np.array([fe.mean_s[name] for fe in self.front_ends])
        if x[0] <= target <= x[-1]:
            wanted = float(np.interp(target, x, values))
        else:
            i = (0, 1) if target < x[0] else (-2, -1)
            slope = (values[i[1]] - values[i[0]]) / (x[i[1]] - x[i[0]])
            wanted = float(values[i[0]] + slope * (target - x[i[0]]))
        return max(wanted, 0.5 * values[nearest])

    def _ratio(self, name: str, nearest: int, load: float, tokens_per_s: float | None) -> float:
        """How much `name`'s mean grows from the nearest level's to (load, tokens_per_s)."""
        shape, curve = self._fit
        there = (self.loads[nearest], self.tokens_per_s[nearest] if self.tokens_per_s else None)
        factor = curves.scale(shape, curve, name, there, (load, tokens_per_s)) if shape else None
        if factor is None:
            mean = self.front_ends[nearest].mean_s[name]
            factor = self._follow(name, nearest, load) / mean if mean > 0 else 1.0
        return factor
