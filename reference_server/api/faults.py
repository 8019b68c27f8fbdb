"""A replica's faults at run time: when each was set, whether it is active, and the seeded draws of an error
burst. The spec's grammar is `contract.faults` (one owner for the server, the plan and the fleet).

Set at start (`--fault`) or at run time through `POST /admin/faults` (a fault's spec, or a list of them),
answered only to loopback clients; `GET /admin/faults` and `/v1/engine` (so run.json) list every fault
set, with its window in unix seconds; an injected error names itself (`code`: `injected_fault`) in the
records it leaves. Error bursts draw from one seeded stream, so a run is reproducible.
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass

from contract.faults import KINDS, Fault

__all__ = ["KINDS", "Fault", "FaultPlan", "ScheduledFault"]


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
