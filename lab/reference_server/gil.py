"""How much a busy event loop slows the engine thread that shares its process (and its GIL).

    python -m lab.reference_server.gil [--batch 32] [--steps 12] [--repeats 8]

The serving process runs the engine on a thread beside the asyncio event loop. Torch ops
release the GIL, but the engine's Python (scheduler, block manager, sampling, postprocess)
needs it, and so does every request the event loop handles. A second thread stands in for
a busy event loop (2 ms of Python, then a 3 ms I/O wait, over and over: 40% GIL duty) and
the engine's step time is measured with and without it, at Python's default 5 ms switch
interval and at 0.5 ms, interleaved in short blocks so machine noise hits every cell alike.
It is what `--engine-mode thread` costs; the default engine process does not share the GIL.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time

from rich.console import Console
from rich.table import Table

from reference_server.engine.config import EngineConfig
from reference_server.engine.engine import Engine
from engine_core.scheduling.sampling import SamplingParams

INTERVALS_S = (0.005, 0.0005)   # Python's default, and a 10x shorter one


def busy_loop(active: threading.Event, stop: threading.Event, work_s: float = 0.002, wait_s: float = 0.003) -> None:
    while not stop.is_set():
        if not active.is_set():
            time.sleep(0.01)
            continue
        start = time.perf_counter()
        while time.perf_counter() - start < work_s:
            sum(range(100))   # pure Python: holds the GIL
        time.sleep(wait_s)    # I/O wait: releases it


def step_times_ms(engine: Engine, batch: int, steps: int, tag: str) -> list[float]:
    ids = [f"{tag}-{i}" for i in range(batch)]
    for request_id in ids:
        engine.add_request(request_id, [256, 1, 2], SamplingParams(max_tokens=steps + 8, ignore_eos=True))
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        engine.step()
        times.append((time.perf_counter() - start) * 1e3)
    for request_id in ids:
        engine.abort_request(request_id)
    return times[2:]   # skip the prefill steps


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.reference_server.gil", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--repeats", type=int, default=8)
    args = p.parse_args(argv)
    engine = Engine(EngineConfig(model=args.model))
    engine.warmup()
    active, stop = threading.Event(), threading.Event()
    threading.Thread(target=busy_loop, args=(active, stop), daemon=True).start()
    samples: dict[tuple[float, bool], list[float]] = {(i, b): [] for i in INTERVALS_S for b in (False, True)}
    original = sys.getswitchinterval()
    try:
        # interleaved in short blocks, so a noisy neighbour hits every cell alike
        for run in range(args.repeats):
            for interval_s in INTERVALS_S:
                sys.setswitchinterval(interval_s)
                for busy in (False, True):
                    (active.set if busy else active.clear)()
                    samples[interval_s, busy] += step_times_ms(engine, args.batch, args.steps, f"{run}{interval_s}{busy}")
    finally:
        stop.set()
        sys.setswitchinterval(original)
    table = Table(title=f"engine step time (ms), {args.model}, batch {args.batch}, "
                        f"{args.repeats} x {args.steps} steps per cell")
    for column in ("switch interval", "quiet p50", "busy loop p50", "busy loop p90", "slowdown (p50)"):
        table.add_column(column, justify="right")
    for interval_s in INTERVALS_S:
        quiet, busy = samples[interval_s, False], samples[interval_s, True]
        table.add_row(f"{interval_s * 1e3:g} ms", f"{statistics.median(quiet):.1f}", f"{statistics.median(busy):.1f}",
                      f"{statistics.quantiles(busy, n=10)[-1]:.1f}",
                      f"{statistics.median(busy) / statistics.median(quiet):.2f}x")
    Console().print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
