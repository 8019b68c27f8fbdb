"""Keep the load generator and the server on separate cores when they share a machine.

Without pinning, the scheduler places the server's threads and Locust wherever it
likes, and a placement tends to persist for a whole run: identical A/A runs of the
tiny preset on 2 cores differed by up to 1.9x in p50 TPOT, while each run was steady.
Pinning makes runs repeatable: Locust gets core 0, the server the rest.

Uses `taskset` (util-linux) as a command prefix, so the affinity applies before the
child starts any thread; without taskset (or with one core) nothing is pinned.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass


@dataclass(frozen=True)
class CpuPlan:
    """Core lists for the two sides, or None when they are not pinned."""

    loadgen: tuple[int, ...] | None
    server: tuple[int, ...] | None

    def prefix(self, cores: tuple[int, ...] | None) -> list[str]:
        if not cores:
            return []
        return ["taskset", "-c", ",".join(str(c) for c in cores)]

    def describe(self) -> dict:
        return {"loadgen_cpus": list(self.loadgen) if self.loadgen else None,
                "server_cpus": list(self.server) if self.server else None}


def plan_cpus(enabled: bool, external_server: bool) -> CpuPlan:
    """Core 0 for Locust, the remaining cores for a server we start; nothing pinned when disabled,
    on one core, without taskset, or when the server is external (its placement is not ours)."""
    cores = tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else ()
    if not enabled or len(cores) < 2 or shutil.which("taskset") is None or external_server:
        return CpuPlan(None, None)
    return CpuPlan(loadgen=cores[:1], server=cores[1:])
