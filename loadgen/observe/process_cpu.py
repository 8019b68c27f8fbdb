"""CPU time of a serving process tree (utime + stime of it and all its descendants), from /proc via psutil.

A compare run charges each slice the server CPU its arm spent in it: the tree's total at
the slice's end minus at its start. Children that exit during a slice take their time
with them (the reference server's engine process lives as long as the server).
"""

from __future__ import annotations

from collections.abc import Iterable

import psutil


def tree_cpu_seconds(pids: Iterable[int]) -> float | None:
    """Sum of user + system CPU seconds of the processes `pids` and their descendants; None when
    none of them can be read (gone, or not ours to read)."""
    total, seen = 0.0, False
    for pid in pids:
        try:
            root = psutil.Process(pid)
            tree = [root, *root.children(recursive=True)]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for process in tree:
            try:
                times = process.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            total += times.user + times.system
            seen = True
    return total if seen else None
