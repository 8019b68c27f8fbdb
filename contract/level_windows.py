"""When a level was measured: its windows, one per round (`servecap sweep --rounds K`).

A sweep without rounds measures each level once, in one window: from its first measured send
to its last completion. With K rounds it measures every level K times, a K-th of `--duration`
each, in a serpentine order over the levels (1, 2, 4, then 4, 2, 1, ...), so each level's
figures average over the machine's drift through the whole run, and a linear drift falls on
every level alike. Each record carries its `round`; a level's windows are then one per round:

    [(first send, last completion) of round 0, ... of round K-1]   (unix s, sorted by start)

Everything measured over a level's time (its throughput, the server's scrapes, the engine's
steps, the device samples) is taken over these windows only, never over the other levels'
time between them. One owner, used by the sweep while it runs and by the report.

Pure: numpy only.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

Window = tuple[float, float]


def level_windows(t_start: Sequence[float], t_end: Sequence[float],
                  rounds: Sequence[float | None] | None = None) -> list[Window]:
    """One (start, end) per round from a level's measured records (send times, completion times,
    rounds; a missing round is round 0): start = first send, end = last completion (at least the
    last send). Empty without records."""
    starts = np.asarray(t_start, dtype=float)
    if not starts.size:
        return []
    ends = np.asarray(t_end, dtype=float)
    ends = np.where(np.isfinite(ends), np.maximum(ends, starts), starts)
    keys = np.zeros(starts.size) if rounds is None else np.asarray(rounds, dtype=float)   # None -> NaN
    keys = np.where(np.isnan(keys), 0.0, keys)
    windows = [(float(starts[keys == key].min()), float(ends[keys == key].max())) for key in np.unique(keys)]
    return sorted(windows)


def total_s(windows: Iterable[Window]) -> float:
    """The time the level was measured: the sum of its windows' lengths."""
    return float(sum(max(end - start, 0.0) for start, end in windows))


def inside(t: Sequence[float] | np.ndarray, windows: Iterable[Window]) -> np.ndarray:
    """bool [len(t)]: which times fall in any window (both ends included)."""
    t = np.asarray(t, dtype=float)
    mask = np.zeros(t.shape, dtype=bool)
    for start, end in windows:
        mask |= (t >= start) & (t <= end)
    return mask


def span(windows: Sequence[Window]) -> Window | None:
    """(first start, last end): the whole stretch the windows cover, gaps included."""
    return (windows[0][0], max(end for _, end in windows)) if windows else None


def serpentine(loads: Sequence, round_index: int) -> list:
    """The levels' order in one round: as given in even rounds, reversed in odd ones."""
    return list(loads) if round_index % 2 == 0 else list(reversed(loads))
