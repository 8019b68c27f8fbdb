"""Level ids: `continuous/c=8`, `none/rps=2.0`, `c=8`, `rps=4.0`.

A level id names the batching strategy (before the slash, optional) and the
offered load (`c=` closed-loop concurrency, `rps=` open-loop arrival rate).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# offered-load key in the id -> key in summary.json's `offered`
_OFFERED_KEYS = {"c": "concurrency", "rps": "rate_rps"}
_LOAD_PATTERN = re.compile(r"^(?P<key>c|rps)=(?P<value>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)$")


@dataclass(frozen=True)
class LevelId:
    """One parsed level id.

    Attributes:
        level: the id exactly as written in the records.
        strategy: batching strategy before the slash, or the run's strategy, or None.
        offered_kind: `concurrency` or `rate_rps`; None when the id does not say.
        offered_value: the offered load as a number; None when the id does not say.
    """

    level: str
    strategy: str | None
    offered_kind: str | None
    offered_value: float | None

    @property
    def offered(self) -> dict[str, float | int]:
        """`{"concurrency": 8}` or `{"rate_rps": 4.0}` (summary.json's shape); {} when unknown."""
        if self.offered_kind is None or self.offered_value is None:
            return {}
        value = self.offered_value
        if self.offered_kind == "concurrency" and float(value).is_integer():
            return {self.offered_kind: int(value)}
        return {self.offered_kind: value}


def parse_level_id(level: str, default_strategy: str | None = None) -> LevelId:
    """Split `strategy/c=8` into its parts; an id without a load part keeps offered=None."""
    strategy, _, load = level.rpartition("/")
    strategy = strategy or default_strategy
    match = _LOAD_PATTERN.match(load.strip())
    if match is None:
        return LevelId(level, strategy, None, None)
    return LevelId(level, strategy, _OFFERED_KEYS[match["key"]], float(match["value"]))


def offered_axis_label(offered_kind: str | None) -> str:
    return {
        "concurrency": "offered load (concurrent streams)",
        "rate_rps": "offered load (requests/s)",
    }.get(offered_kind or "", "offered load")
