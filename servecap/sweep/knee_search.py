"""`servecap sweep --auto`'s search: the highest concurrency that meets the SLO. Pure: the caller runs levels.

Ramp 1, 2, 4, ... until a level misses the SLO, then bisect between the last level
that met it and the first that did not, until they are adjacent or within 12.5%.
Every level tried at or below the answer met the SLO and every one above it missed,
so the report's verdict (which walks the measured levels upward and stops at the first
miss, by the same rule) names the same level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

BISECT_UNTIL = 0.125  # stop bisecting when the gap is this fraction of the good level


@dataclass(frozen=True)
class KneeSearch:
    max_meeting_slo: int | None   # None: not even one user met it
    first_failing: int | None     # None: every level up to the ramp's end met it


def search_knee(meets: Callable[[int], bool], max_concurrency: int) -> KneeSearch:
    """`meets(concurrency)` runs that level and says whether it met the SLO."""
    good, bad, load = 0, None, 1
    while load <= max_concurrency:
        if meets(load):
            good, load = load, load * 2
        else:
            bad = load
            break
    while bad is not None and bad - good > 1 and (good == 0 or (bad - good) / good > BISECT_UNTIL):
        mid = (good + bad) // 2
        if meets(mid):
            good = mid
        else:
            bad = mid
    return KneeSearch(good or None, bad)
