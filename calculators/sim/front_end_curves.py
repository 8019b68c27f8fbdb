"""How a front-end delay's mean moves with the load: two fitted shapes, and which one to trust.

Both fit each delay's per-level means (least squares on log means, scipy.optimize.least_squares),
each delay on its positive levels (an external engine's split floors some delays at 0: such a level
says nothing about the shape; a delay positive at fewer than two levels keeps its positive mean, or 0):

    queue over output tokens/s x:   mean(x) = d0 + k x / (X - x)     the capacity X shared by the delays
        the front end as a server whose work is per chunk: it climbs as the chunk rate nears what
        its core can push (the reference server's front end, which shares a core with Locust).
    power over the load L:          mean(L) = d0 + k L^a             a in [0.25, 3] per delay
        the front end as a station of the closed loop that handles every stream in turn: each of
        L users' chunks are in the way of a new request's (vLLM's API server with Locust on one
        core: its in-delay rose about linearly with the users, 14 -> 110 ms from 1 to 32).

`choose` picks by leave-one-level-out within the calibration levels themselves: each shape, fitted
without one level, predicts that level's total mean delay (from the nearest other level, scaled by
the fitted ratio, as FrontEndByLoad.at does); the shape with the smaller median |error| wins.
Pure: numbers in, numbers out.
"""

from __future__ import annotations

import numpy as np

DELAYS = ("in_s", "first_out_s", "last_out_s")
CAPACITY_BOUNDS = (1.02, 50.0)   # the fitted capacity, as multiples of the highest measured throughput
EXPONENT_BOUNDS = (0.25, 3.0)
QUEUE, POWER = "queue over output tokens/s", "power over the load"


def queue_mean(curve: dict, name: str, x: float) -> float:
    capacity = curve["capacity_tokens_per_s"]
    x = min(max(x, 0.0), 0.98 * capacity)   # past the fitted capacity: held just below it
    return curve[name]["d0_s"] + curve[name]["k_s"] * x / (capacity - x)


def power_mean(curve: dict, name: str, load: float) -> float:
    c = curve[name]
    return c["d0_s"] + c["k_s"] * max(load, 0.0) ** c["exponent"]


def scale(shape: str, curve: dict, name: str, there: tuple[float, float | None],
          here: tuple[float, float | None]) -> float | None:
    """How much `name`'s mean grows from one level to another under the fitted shape: curve(here) /
    curve(there), each point (load, output tokens/s); 1 where the curve is 0 there; None where the
    shape cannot say (a queue without a throughput)."""
    if shape == POWER:
        base, wanted = power_mean(curve, name, there[0]), power_mean(curve, name, here[0])
    elif shape == QUEUE and there[1] is not None and here[1] is not None:
        base, wanted = queue_mean(curve, name, there[1]), queue_mean(curve, name, here[1])
    else:
        return None
    return wanted / base if base > 0 else 1.0


def _split(means: dict[str, np.ndarray]) -> tuple[dict, dict, list[str]]:
    """(positive masks, flat delays {name: mean}, the names to fit)."""
    positive = {name: m > 0 for name, m in means.items()}
    flat = {name: float(m[positive[name]].mean()) if positive[name].any() else 0.0
            for name, m in means.items() if positive[name].sum() < 2}
    return positive, flat, [name for name in DELAYS if name not in flat]


def _least_squares(residuals, start: list, lower: list, upper: list) -> np.ndarray | None:
    """The fitted parameters, or None where the fit raised or did not converge."""
    from scipy import optimize   # scipy only where a curve is fitted (the simulator's import stays light)

    try:
        fit = optimize.least_squares(residuals, start, bounds=(lower, upper))
    except (ValueError, FloatingPointError):
        return None
    return fit.x if fit.success else None


def fit_queue(tokens_per_s, means: dict[str, np.ndarray]) -> dict | None:
    """{"capacity_tokens_per_s", delay: {"d0_s", "k_s"}} from [n] throughputs and {delay: [n] means};
    None with fewer than three levels, a throughput <= 0, nothing to fit or a failed fit."""
    x = np.asarray(tokens_per_s, dtype=float)
    if len(x) < 3 or x.min() <= 0:
        return None
    positive, flat, names = _split(means)
    if not names:
        return None
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
    fitted = _least_squares(residuals, start, lower, upper)
    if fitted is None:
        return None
    capacity, dk = unpack(fitted)
    return {"capacity_tokens_per_s": float(capacity),
            **{name: {"d0_s": float(dk[i, 0]), "k_s": float(dk[i, 1])} for i, name in enumerate(names)},
            **{name: {"d0_s": mean, "k_s": 0.0} for name, mean in flat.items()}}


def fit_power(loads, means: dict[str, np.ndarray]) -> dict | None:
    """{delay: {"d0_s", "k_s", "exponent"}} from [n] loads and {delay: [n] means}; a delay positive at
    two levels only gets a line (exponent 1); None with fewer than three levels or a failed fit."""
    x = np.asarray(loads, dtype=float)
    if len(x) < 3 or x.min() <= 0:
        return None
    positive, flat, names = _split(means)
    out = {name: {"d0_s": mean, "k_s": 0.0, "exponent": 1.0} for name, mean in flat.items()}
    for name in names:
        keep = positive[name]
        xs, ys = x[keep], means[name][keep]
        free = keep.sum() >= 3

        def residuals(p: np.ndarray) -> np.ndarray:
            exponent = p[2] if free else 1.0
            return np.log(p[0] + p[1] * xs ** exponent) - np.log(ys)

        start = [0.7 * ys.min(), 0.3 * ys.min(), 1.0][: 3 if free else 2]
        lower = [1e-9, 0.0, EXPONENT_BOUNDS[0]][: len(start)]
        upper = [np.inf, np.inf, EXPONENT_BOUNDS[1]][: len(start)]
        fitted = _least_squares(residuals, start, lower, upper)
        if fitted is None:
            return None
        out[name] = {"d0_s": float(fitted[0]), "k_s": float(fitted[1]), "exponent": float(fitted[2]) if free else 1.0}
    return out


def choose(loads, tokens_per_s, means: dict[str, np.ndarray]) -> tuple[str | None, dict | None]:
    """(the shape, its curve on every level): the one whose leave-one-level-out error on the total
    mean delay is smaller (at least four levels; with three, the queue where it fits, else the power
    curve); (None, None) where neither fits."""
    loads, tokens = np.asarray(loads, dtype=float), np.asarray(tokens_per_s, dtype=float)
    fits = {QUEUE: fit_queue(tokens, means) if len(tokens) == len(loads) else None, POWER: fit_power(loads, means)}
    fitted = [shape for shape, curve in fits.items() if curve is not None]
    if len(fitted) < 2 or len(loads) < 4:
        shape = fitted[0] if fitted else None
        return shape, fits.get(shape)
    errors = held_out_errors(loads, tokens, means, fitted)
    best = min(fitted, key=lambda shape: errors[shape])
    return best, fits[best]


def held_out_errors(loads, tokens_per_s, means: dict[str, np.ndarray], shapes=(QUEUE, POWER)) -> dict[str, float]:
    """{shape: median |predicted / measured - 1| of the total mean delay, each level predicted by the
    shape fitted on the others} (inf where a fit fails)."""
    loads, tokens = np.asarray(loads, dtype=float), np.asarray(tokens_per_s, dtype=float)
    return {shape: _held_out_error(shape, loads, tokens, means) for shape in shapes}


def _held_out_error(shape: str, loads: np.ndarray, tokens: np.ndarray, means: dict[str, np.ndarray]) -> float:
    total = sum(means[name] for name in DELAYS)
    errors = []
    for k in range(len(loads)):
        keep = np.arange(len(loads)) != k
        part = {name: m[keep] for name, m in means.items()}
        curve = fit_queue(tokens[keep], part) if shape == QUEUE else fit_power(loads[keep], part)
        if curve is None:
            return np.inf   # a shape that cannot be fitted without one of the levels is not trusted
        if total[k] <= 0:
            continue
        others = np.flatnonzero(keep)
        nearest = others[np.argmin(np.abs(np.log(loads[others]) - np.log(loads[k])))]
        there, here = (loads[nearest], tokens[nearest]), (loads[k], tokens[k])
        predicted = sum(means[name][nearest] * scale(shape, curve, name, there, here) for name in DELAYS)
        errors.append(abs(predicted / total[k] - 1))
    return float(np.median(errors)) if errors else np.inf
