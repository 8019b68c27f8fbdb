"""How many torch CPU threads the serving engine runs when `--num-threads` is not given.

The engine shares its host with the HTTP front end (and, under test, the load generator). A torch
op splits across its intra-op threads and waits for all of them at a barrier, so one thread per core
stalls every step whenever anything else takes a core for a scheduler slice: one busy core made the
tiny preset's decode steps tens of times slower on 2 cores (docs/results.md). vLLM's CPU backend
keeps a core for its front-end process for the same reason (`OMPProcessManager.reserve_cpu_num`, 1 on
x86, vllm/utils/ompmultiprocessing.py). So: every core the process may use but one, at least one;
an engine pinned to `--engine-cpus` has those cores to itself (the front end runs elsewhere), one
thread each.
"""

from __future__ import annotations

import os


def engine_threads(engine_cpus: tuple[int, ...] = ()) -> int:
    """The default thread count for an engine pinned to `engine_cpus` (empty: not pinned)."""
    if engine_cpus:
        return len(engine_cpus)
    return max(1, len(os.sched_getaffinity(0)) - 1)
