"""What stands between the load generator's clock and the engine's: the front end, the network, the client.

Measured per request by joining the client's record with the engine's (`calculators.calibrate.
fit_front_end`):
    in_s        client send -> the engine has it            (HTTP, parsing, tokenizing, the hop to the engine)
    first_out_s engine's first token -> the client has it   (the hop back, SSE framing, the client's read)
    last_out_s  engine's last token -> the client's last byte
    think_s     closed loop: the client's last byte -> its next send (the load generator's own work)
The simulator runs on the engine's clock and draws one measured request's (in, first_out, last_out)
per simulated request, so a slow hop keeps its measured company:
    client ttft = in + engine ttft + first_out;   client e2e = in + engine e2e + last_out
and a closed-loop user sends again `last_out + think` after the engine finished its request.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class FrontEnd:
    """Per-request delays (s), the three tuples of equal length (one entry per measured request)."""

    in_s: tuple[float, ...]
    first_out_s: tuple[float, ...]
    last_out_s: tuple[float, ...]
    think_s: float = 0.0

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

    @classmethod
    def none(cls) -> "FrontEnd":
        return cls((0.0,), (0.0,), (0.0,))

    def draw(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(in, first_out, last_out) [n] each: n measured requests, drawn with replacement."""
        pick = rng.integers(0, len(self.in_s), size=n)
        return (np.asarray(self.in_s)[pick], np.asarray(self.first_out_s)[pick], np.asarray(self.last_out_s)[pick])

    @property
    def mean_s(self) -> dict[str, float]:
        return {"in_s": float(np.mean(self.in_s)), "first_out_s": float(np.mean(self.first_out_s)),
                "last_out_s": float(np.mean(self.last_out_s)), "think_s": self.think_s}


DELAYS = ("in_s", "first_out_s", "last_out_s")


@dataclass(frozen=True)
class FrontEndByLoad:
    """Front-end delays measured at several loads, for any load.

    The front end is a server too: on a small machine it shares a core with the load generator,
    and every output chunk costs it (and the client) a little, so its delays climb as the chunk
    rate nears what that core can push. With three or more measured levels each delay's mean is
    fitted as a queue over the level's output tokens/s x:
        mean(x) = d0 + k x / (X - x)      (d0, k >= 0 per delay; the capacity X shared)
    (least squares on log means, scipy.optimize.least_squares). ``at(load, tokens_per_s)`` keeps
    the joint draws of the measured level nearest in log(load) and scales each delay by
    mean(x) / mean(x of that level) (a delay measured as 0 at a level is fitted on the others; one
    measured as 0 everywhere stays 0: an external engine's split puts nothing on first_out_s); without a throughput or a fit (fewer levels, or it failed),
    the means are interpolated piecewise linearly in log(load) instead (linear past the ends,
    never below half the nearest level's mean). Think time always follows log(load).
    """

    loads: tuple[float, ...]
    front_ends: tuple[FrontEnd, ...]
    tokens_per_s: tuple[float, ...] = ()
    _curve: dict | None = field(default=None, init=False, repr=False, compare=False)

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
        object.__setattr__(self, "_curve", _fit_queue_curve(self.tokens_per_s, self.front_ends))

    @property
    def curve(self) -> dict | None:
        """The fitted queue curve: {"capacity_tokens_per_s", delay: {"d0_s", "k_s"}}, or None."""
        return self._curve

    def at(self, load: float, tokens_per_s: float | None = None) -> FrontEnd:
        x = np.log(np.asarray(self.loads))
        target = float(np.log(load))
        nearest = int(np.argmin(np.abs(x - target)))
        base = self.front_ends[nearest]
        if len(x) == 1:
            return base
        means = [fe.mean_s for fe in self.front_ends]

        def follow(name: str) -> float:
            values = np.array([m[name] for m in means])
            if x[0] <= target <= x[-1]:
                wanted = float(np.interp(target, x, values))
            else:
                i = (0, 1) if target < x[0] else (-2, -1)
                slope = (values[i[1]] - values[i[0]]) / (x[i[1]] - x[i[0]])
                wanted = float(values[i[0]] + slope * (target - x[i[0]]))
            return max(wanted, 0.5 * values[nearest])

        scaled = {}
        for name in DELAYS:
            if self._curve is not None and tokens_per_s is not None:
                there = _queue_mean(self._curve, name, self.tokens_per_s[nearest])
                factor = _queue_mean(self._curve, name, tokens_per_s) / there if there > 0 else 1.0
            else:
                mean = means[nearest][name]
                factor = follow(name) / mean if mean > 0 else 1.0
            scaled[name] = tuple(v * factor for v in getattr(base, name))
        return FrontEnd(**scaled, think_s=follow("think_s"))


CAPACITY_BOUNDS = (1.02, 50.0)   # the fitted capacity, as multiples of the highest measured throughput


def _queue_mean(curve: dict, name: str, x: float) -> float:
    capacity = curve["capacity_tokens_per_s"]
    x = min(max(x, 0.0), 0.98 * capacity)   # past the fitted capacity: held just below it
    return curve[name]["d0_s"] + curve[name]["k_s"] * x / (capacity - x)


def _fit_queue_curve(tokens_per_s: tuple[float, ...], front_ends: tuple[FrontEnd, ...]) -> dict | None:
    if len(tokens_per_s) < 3 or min(tokens_per_s) <= 0:
        return None
    from scipy import optimize   # scipy only where a curve is fitted

    x = np.asarray(tokens_per_s)
    all_means = {name: np.array([fe.mean_s[name] for fe in front_ends]) for name in DELAYS}
    # a level whose delay came out 0 (an external engine's split floors what one mean less another
    # leaves) says nothing about its curve: each delay is fitted on its positive levels; one with
    # fewer than two keeps its positive mean (or 0) at every load
    positive = {name: m > 0 for name, m in all_means.items()}
    flat = {name: float(m[positive[name]].mean()) if positive[name].any() else 0.0
            for name, m in all_means.items() if positive[name].sum() < 2}
    names = [name for name in DELAYS if name not in flat]
    if not names:
        return None
    means = {name: all_means[name] for name in names}
    top = float(x.max())

    def unpack(p: np.ndarray) -> tuple[float, np.ndarray]:
        return top * p[0], p[1:].reshape(len(names), 2)

    def residuals(p: np.ndarray) -> np.ndarray:
        capacity, dk = unpack(p)
        load = x / (capacity - x)
        return np.concatenate([np.log(dk[i, 0] + dk[i, 1] * load[positive[name]]) - np.log(means[name][positive[name]])
                               for i, name in enumerate(names)])

    start = [2.0] + [v for name in names for v in (0.7 * means[name][positive[name]].min(),
                                                    0.1 * means[name][positive[name]].min())]
    lower = [CAPACITY_BOUNDS[0]] + [1e-9, 0.0] * len(names)
    upper = [CAPACITY_BOUNDS[1]] + [np.inf, np.inf] * len(names)
    try:
        fit = optimize.least_squares(residuals, start, bounds=(lower, upper))
    except (ValueError, FloatingPointError):
        return None
    if not fit.success:
        return None
    capacity, dk = unpack(fit.x)
    return {"capacity_tokens_per_s": float(capacity),
            **{name: {"d0_s": float(dk[i, 0]), "k_s": float(dk[i, 1])} for i, name in enumerate(names)},
            **{name: {"d0_s": mean, "k_s": 0.0} for name, mean in flat.items()}}
