"""Keep the load generator, the server's front end and its engine on separate cores.

Without pinning, the scheduler places the server's threads and Locust wherever it
likes, and a placement tends to persist for a whole run: identical A/A runs of the
tiny preset on 2 cores differed by up to 1.9x in p50 TPOT, while each run was steady.

The engine process (the system under test) gets cores of its own; Locust gets core 0;
the HTTP front end gets core 1, or shares core 0 with Locust on a 2-core machine:

    cores   loadgen   server (HTTP)   engine process
    2       0         0               1
    N >= 3  0         1               2..N-1
    thread mode (`--engine-mode thread` in the server args): loadgen 0, server 1..N-1
    P Locust processes (`--loadgen-processes P`), N >= P + 2: loadgen 0..P-1 (one core each),
            server P, engine P+1..N-1; fewer cores: the processes share the table's loadgen core

Measured on 2 cores, tiny preset, 4 streams, 5 runs each: engine alone on core 1 gave
1690-1780 us p50 TPOT and ~2000 tok/s; HTTP and engine sharing core 1 gave 2650-3140 us
(processes) or 2180-2320 us (one process, engine thread).

Priority: `loadgen_priority` owns how soon Locust gets the core it shares.

Uses `taskset` (util-linux) as a command prefix, so the affinity applies before the
child starts any thread, and the server's `--engine-cpus` for the engine process; without
taskset (or with one core) nothing is pinned. `CpuPlan.place` writes the plan into a
server's launch spec, in the placement fields the user's `--server-args` left unset.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, replace

from reference_server.runtime.engine_threads import engine_threads
from servecap.launch.spec import ReferenceServerSpec, taskset_prefix


@dataclass(frozen=True)
class CpuPlan:
    """Core lists for the two sides, or None when they are not pinned."""

    loadgen: tuple[int, ...] | None
    server: tuple[int, ...] | None
    engine: tuple[int, ...] | None = None   # the engine process's cores (`--engine-cpus`)

    def prefix(self, cores: tuple[int, ...] | None) -> list[str]:
        return taskset_prefix(cores)

    def place(self, spec: ReferenceServerSpec) -> ReferenceServerSpec:
        """`spec` with the plan's cores, and a torch thread per engine core, where the user set none."""
        engine_cpus = spec.engine_cpus or (self.engine if spec.engine_process and self.engine else ())
        # Locust shares this machine: a torch thread per core would stall on OpenMP barriers whenever
        # the load generator takes a core (measured: 144 ms vs 3.6 ms per tiny decode step on 2 cores);
        # the server's default rule (engine_threads) applied here, where every core is seen, and written into
        # the command: a server started under taskset would count only the cores it was given
        threads = spec.num_threads or engine_threads(engine_cpus)
        return replace(spec, engine_cpus=engine_cpus, num_threads=threads,
                       server_cpus=spec.server_cpus or self.server or ())

    @contextmanager
    def orchestrator_on_loadgen_cores(self):
        """Run the sweep's own threads (the samplers, the /metrics scraper, the engine-record poller)
        on the load generator's cores while inside: unpinned, their ticks landed on the engine's core
        and each cost a step there a scheduler slice (measured: a 9 ms step every 0.5 s in a 1-2 ms
        run of steps). The affinity the process had is restored on the way out."""
        before = os.sched_getaffinity(0) if self.loadgen and hasattr(os, "sched_setaffinity") else None
        if before is not None:
            os.sched_setaffinity(0, set(self.loadgen))
        try:
            yield
        finally:
            if before is not None:
                os.sched_setaffinity(0, before)

    def describe(self) -> dict:
        return {"loadgen_cpus": list(self.loadgen) if self.loadgen else None,
                "server_cpus": list(self.server) if self.server else None,
                "engine_cpus": list(self.engine) if self.engine else None}


def plan_cpus(enabled: bool, external_server: bool, engine_process: bool = True,
              loadgen_processes: int = 1) -> CpuPlan:
    """The table in the module docstring; nothing pinned when disabled, on one core, without
    taskset, or when the server is external (its placement is not ours)."""
    cores = tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else ()
    if not enabled or len(cores) < 2 or shutil.which("taskset") is None or external_server:
        return CpuPlan(None, None)
    if loadgen_processes > 1 and len(cores) >= loadgen_processes + 2:
        split = loadgen_processes
        if not engine_process:
            return CpuPlan(loadgen=cores[:split], server=cores[split:])
        return CpuPlan(loadgen=cores[:split], server=cores[split:split + 1], engine=cores[split + 1:])
    if not engine_process:
        return CpuPlan(loadgen=cores[:1], server=cores[1:])
    if len(cores) == 2:
        return CpuPlan(loadgen=cores[:1], server=cores[:1], engine=cores[1:])
    return CpuPlan(loadgen=cores[:1], server=cores[1:2], engine=cores[2:])
