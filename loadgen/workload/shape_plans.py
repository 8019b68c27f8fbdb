"""User-count plans over time for `--shape` (pure; `shapes.py` wraps them for Locust).

    step:U1,U2,...:HOLD_S           each user count held HOLD_S seconds, in order
    ramp:FROM:TO:DURATION_S         users move linearly from FROM to TO over DURATION_S
    spike:BASE:PEAK:BASE_S:SPIKE_S  BASE for BASE_S, PEAK for SPIKE_S, BASE for BASE_S

`at(t)` gives (users, spawn_rate) at run time t, or None once the plan is over (Locust
then stops the test). The spawn rate is `spawn_rate` users/s, or by default fast enough
to reach each stage within a second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

KINDS = ("step", "ramp", "spike")


@dataclass(frozen=True)
class ShapePlan:
    kind: str
    # (end_s, users_at_start, users_at_end): piecewise-linear stages, back to back from t=0
    stages: tuple[tuple[float, int, int], ...]
    spawn_rate: float

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if not self.stages:
            raise ValueError("stages must not be empty")
        if not self.spawn_rate > 0:
            raise ValueError(f"spawn_rate must be > 0, got {self.spawn_rate}")

    @property
    def duration_s(self) -> float:
        return self.stages[-1][0]

    def at(self, t: float) -> tuple[int, float] | None:
        start = 0.0
        for end, users_from, users_to in self.stages:
            if t < end:
                frac = (t - start) / (end - start) if end > start else 1.0
                return round(users_from + (users_to - users_from) * frac), self.spawn_rate
            start = end
        return None


def _ints(text: str, what: str) -> list[int]:
    out = []
    for part in text.split(","):
        try:
            value = int(part)
        except ValueError:
            raise ValueError(f"--shape: {what} {part!r} is not a whole number") from None
        if value < 0:
            raise ValueError(f"--shape: {what} must be >= 0, got {value}")
        out.append(value)
    return out


def _seconds(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--shape: {what} {text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"--shape: {what} must be > 0 seconds, got {text!r}")
    return value


def parse_shape(spec: str, spawn_rate: float = 0.0) -> ShapePlan:
    """Parse a `--shape` spec (module doc); ValueError names the problem."""
    kind, _, rest = str(spec).strip().partition(":")
    parts = rest.split(":") if rest else []
    if kind == "step":
        if len(parts) != 2:
            raise ValueError("--shape: step takes step:U1,U2,...:HOLD_S")
        levels, hold = _ints(parts[0], "users"), _seconds(parts[1], "hold")
        stages = tuple(((i + 1) * hold, u, u) for i, u in enumerate(levels))
    elif kind == "ramp":
        if len(parts) != 3:
            raise ValueError("--shape: ramp takes ramp:FROM:TO:DURATION_S")
        (low,), (high,) = _ints(parts[0], "from"), _ints(parts[1], "to")
        stages = ((_seconds(parts[2], "duration"), low, high),)
    elif kind == "spike":
        if len(parts) != 4:
            raise ValueError("--shape: spike takes spike:BASE:PEAK:BASE_S:SPIKE_S")
        (base,), (peak,) = _ints(parts[0], "base"), _ints(parts[1], "peak")
        base_s, spike_s = _seconds(parts[2], "base duration"), _seconds(parts[3], "spike duration")
        stages = ((base_s, base, base), (base_s + spike_s, peak, peak), (2 * base_s + spike_s, base, base))
    else:
        raise ValueError(f"--shape: {spec!r} is not step:..., ramp:... or spike:...")
    most = max(max(a, b) for _, a, b in stages)
    if most < 1:
        raise ValueError("--shape: the plan never has a user")
    return ShapePlan(kind, stages, spawn_rate if spawn_rate > 0 else float(most))
