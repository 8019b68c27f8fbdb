"""The canary's file in the run directory: each core's own speed, timed on a fixed cadence (one owner).

    canary.csv   t, source, core, unit, cpu_s, wall_s      (one row per tick, core and unit)

t: unix seconds when the unit finished (the records' clock); source: the sweep's server key, as in
samples.csv and the engine files (a sweep over several strategies appends every server's rows);
core: the core the unit was pinned to; unit: which fixed work (`python`, `numpy`; `steal`: below); cpu_s, wall_s:
how long it took in thread CPU time and in wall time. Written by loadgen.observe.canary, read by
reports.diagnostics.canary_speed.
"""

from __future__ import annotations

CANARY_FILE = "canary.csv"
CANARY_COLUMNS = ("t", "source", "core", "unit", "cpu_s", "wall_s")
CANARY_UNITS = ("python", "numpy")
STEAL_UNIT = "steal"      # rows of this unit: cpu_s = the time the hypervisor took from the core since the
                          # previous tick (/proc/stat's steal), wall_s = all the time accounted to it then
