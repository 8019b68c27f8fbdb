"""Faults a replica can be given on purpose, to rehearse what a slow or failing replica does to a fleet.

    slow:factor=F[,at=T][,for=D]              every engine step takes F times as long
    errors:status=S[,rate=R][,at=T][,for=D]   that share R (default 1) of generation requests is answered S
    stall[,at=T][,for=D]                      generation requests are accepted and never answered: each waits
                                              until the window ends, then gets a 504
    crash[,at=T]                              the process exits (status 1) as if it died

T and D are durations (`30`, `30s`, `2m`, `250ms`), counted from when the fault is set: the server's
start for `--fault`, the request for `POST /admin/faults`. Without `for`, a window lasts until the
process ends. Error bursts draw from one seeded stream, so a run is reproducible. Set at run time
through `POST /admin/faults` (a fault's spec, or a list of them), answered only to loopback clients;
`GET /admin/faults` and `/v1/engine` (so run.json) list every fault set, with its window in unix
seconds; an injected error names itself (`code`: `injected_fault`) in the records it leaves.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import asdict, dataclass

KINDS = ("slow", "errors", "stall", "crash")
_DURATION = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)?$")
_UNIT_S = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
_FIELDS = {"slow": {"factor", "at", "for"}, "errors": {"status", "rate", "at", "for"}, "stall": {"at", "for"},
           "crash": {"at"}}


def _duration(text: str, what: str) -> float:
    match = _DURATION.match(text.strip())
    if not match:
        raise ValueError(f"{what}: {text!r} is not a duration (30, 30s, 2m, 250ms)")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


@dataclass(frozen=True)
class Fault:
    """One fault; `at_s` and `for_s` relative to when it is set (`for_s` None: until the end)."""

    kind: str
    at_s: float = 0.0
    for_s: float | None = None
    factor: float = 1.0
    status: int = 503
    rate: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"fault kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not self.at_s >= 0 or (self.for_s is not None and not self.for_s > 0):
            raise ValueError(f"{self.kind}: at must be >= 0 and for > 0")
        if self.kind == "slow" and not self.factor > 1:
            raise ValueError(f"slow: factor must be greater than 1, got {self.factor!r}")
        if self.kind == "errors" and not (400 <= self.status <= 599 and 0 < self.rate <= 1):
            raise ValueError(f"errors: status must be a 4xx or 5xx and rate in (0, 1], got {self.status!r}, "
                             f"{self.rate!r}")

    @classmethod
    def parse(cls, spec: str) -> Fault:
        """`KIND[:key=value,...]` as the module docstring writes it; ValueError names the bad part."""
        kind, _, rest = spec.strip().partition(":")
        if kind not in KINDS:
            raise ValueError(f"--fault {spec!r}: the kind is one of {', '.join(KINDS)}")
        values: dict = {}
        for part in filter(None, (p.strip() for p in rest.split(","))):
            key, eq, value = part.partition("=")
            if not eq or key not in _FIELDS[kind]:
                raise ValueError(f"--fault {spec!r}: {kind} takes {', '.join(sorted(_FIELDS[kind]))}, not {part!r}")
            try:
                if key in ("at", "for"):
                    values[f"{key}_s"] = _duration(value, f"--fault {spec!r}")
                elif key == "status":
                    values[key] = int(value)
                else:
                    values[key] = float(value)
            except ValueError as exc:
                raise ValueError(str(exc) if "duration" in str(exc) else
                                 f"--fault {spec!r}: {key}={value!r} is not a number") from None
        if kind == "slow" and "factor" not in values:
            raise ValueError(f"--fault {spec!r}: slow needs factor=F")
        if kind == "errors" and "status" not in values:
            raise ValueError(f"--fault {spec!r}: errors needs status=S")
        try:
            return cls(kind, **values)
        except ValueError as exc:
            raise ValueError(f"--fault {spec!r}: {exc}") from None


@dataclass(frozen=True)
class ScheduledFault:
    """A fault set at `set_unix`: active over [start_unix, end_unix)."""

    fault: Fault
    set_unix: float

    @property
    def start_unix(self) -> float:
        return self.set_unix + self.fault.at_s

    @property
    def end_unix(self) -> float:
        return float("inf") if self.fault.for_s is None else self.start_unix + self.fault.for_s

    def active(self, now_unix: float) -> bool:
        return self.start_unix <= now_unix < self.end_unix

    def describe(self) -> dict:
        return {**asdict(self.fault), "start_unix": self.start_unix,
                "end_unix": None if self.fault.for_s is None else self.end_unix}


class FaultPlan:
    """Every fault set on this server, and the seeded draws of its error bursts."""

    def __init__(self, seed: int = 0, clock=time.time) -> None:
        self.scheduled: list[ScheduledFault] = []
        self._rng = random.Random(seed)
        self._clock = clock

    def add(self, fault: Fault) -> ScheduledFault:
        scheduled = ScheduledFault(fault, self._clock())
        self.scheduled.append(scheduled)
        return scheduled

    def active(self, kind: str) -> ScheduledFault | None:
        now = self._clock()
        return next((s for s in reversed(self.scheduled) if s.fault.kind == kind and s.active(now)), None)

    def error_now(self) -> ScheduledFault | None:
        """The error burst this request falls in (a seeded draw at its rate), or None."""
        burst = self.active("errors")
        if burst is None or self._rng.random() >= burst.fault.rate:
            return None
        return burst

    def describe(self) -> list[dict]:
        return [s.describe() for s in self.scheduled]
