"""Faults a replica can be given on purpose: the spec's grammar, one owner for the server (`--fault`,
`POST /admin/faults`), the plan and the fleet (`--replica-fault ID:SPEC`).

    slow:factor=F[,at=T][,for=D]              every engine step takes F times as long
    errors:status=S[,rate=R][,at=T][,for=D]   that share R (default 1) of generation requests is answered S
    stall[,at=T][,for=D]                      generation requests are accepted and never answered: each waits
                                              until the window ends, then gets a 504
    crash[,at=T]                              the process exits (status 1) as if it died

T and D are durations (`30`, `30s`, `2m`, `250ms`), counted from when the fault is set (the server's start
for `--fault`, the request for `POST /admin/faults`, the demand's start for `--replica-fault`). Without
`for`, a window lasts until the end. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    def parse(cls, spec: str, flag: str = "--fault") -> Fault:
        """`KIND[:key=value,...]` as the module docstring writes it; ValueError names `flag` and the bad part."""
        kind, _, rest = spec.strip().partition(":")
        if kind not in KINDS:
            raise ValueError(f"{flag} {spec!r}: the kind is one of {', '.join(KINDS)}")
        values: dict = {}
        for part in filter(None, (p.strip() for p in rest.split(","))):
            key, eq, value = part.partition("=")
            if not eq or key not in _FIELDS[kind]:
                raise ValueError(f"{flag} {spec!r}: {kind} takes {', '.join(sorted(_FIELDS[kind]))}, not {part!r}")
            try:
                if key in ("at", "for"):
                    values[f"{key}_s"] = _duration(value, f"{flag} {spec!r}")
                elif key == "status":
                    values[key] = int(value)
                else:
                    values[key] = float(value)
            except ValueError as exc:
                raise ValueError(str(exc) if "duration" in str(exc) else
                                 f"{flag} {spec!r}: {key}={value!r} is not a number") from None
        if kind == "slow" and "factor" not in values:
            raise ValueError(f"{flag} {spec!r}: slow needs factor=F")
        if kind == "errors" and "status" not in values:
            raise ValueError(f"{flag} {spec!r}: errors needs status=S")
        try:
            return cls(kind, **values)
        except ValueError as exc:
            raise ValueError(f"{flag} {spec!r}: {exc}") from None

    def spec(self, at: bool = True) -> str:
        """The fault as `parse` reads it (`at`: with its start; without, it starts when set)."""
        parts = {"slow": [f"factor={self.factor:g}"], "errors": [f"status={self.status}", f"rate={self.rate:g}"]}
        fields = list(parts.get(self.kind, []))
        if at and self.at_s:
            fields.append(f"at={self.at_s:g}s")
        if self.for_s is not None:
            fields.append(f"for={self.for_s:g}s")
        return self.kind + (":" + ",".join(fields) if fields else "")


def parse_replica_fault(text: str) -> tuple[int, Fault]:
    """`--replica-fault ID:SPEC` (e.g. `1:errors:status=503,at=60,for=30`): a replica's id (r1 is 1, as
    `--kill T:ID` names one) and its fault, with `at` counted from the demand's start."""
    rid, _, spec = text.partition(":")
    if not rid.strip().removeprefix("r").isdigit() or not spec:
        raise ValueError(f"--replica-fault {text!r}: give ID:SPEC, a replica id and a fault spec, "
                         "e.g. 1:errors:status=503,at=60,for=30")
    return int(rid.strip().removeprefix("r")), Fault.parse(spec, flag="--replica-fault")

