"""`calc simulate --jobs`: its levels are independent runs, simulated at once in forked processes."""

from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def level_pool(jobs: int | None, levels: int):
    """A `map` over levels: in this process for one job or one level, else over a pool of processes (forked:
    nothing to import again), `jobs` of them or one per core, never more than the levels."""
    workers = min(jobs or os.cpu_count() or 1, levels)
    if workers <= 1:
        yield map
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method)) as pool:
        yield pool.map
