"""How steady is this machine? The engine's decode loop alone, timed block by block.

    python -m lab.reference_server.drift [--blocks 8] [--processes 8] [--block-s 2] [--cpu 1] [--duet]

No HTTP, no Locust: one engine (tiny preset, one torch thread) decodes batches of 4
sequences, and the mean step time is taken over blocks of `--block-s` seconds, first in one
process (`--blocks` blocks: drift over time), then in `--processes` fresh processes (one
block each: drift plus what differs from process to process). The spread of these figures
is a floor under the run-to-run noise of any load test on this machine, and so under what
`servecap gate` can tell apart from a single pair of runs.

`--duet` then runs two such processes at once on the same core, each timing `--blocks` blocks
that start at the same instant, and compares the log ratio of their simultaneous blocks with
that of adjacent blocks in the one process: the noise left in a pair by `servecap compare
--schedule duet` against `--schedule interleaved`. On this 2-core VM, quiet, with 30 blocks of
1 s on core 1, two runs: log-ratio SD 2.1% and 3.8% in the duet against 10.7% and 7.8%
between adjacent blocks (the blocks of two processes are aligned at the start only).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

from rich.console import Console


def time_blocks(blocks: int, block_s: float, start_at: float | None = None) -> list[float]:
    """Mean decode step time (ms) of each block, in this process; the first block starts at unix
    time `start_at` when given (after the warm-up), so that two processes time the same instants."""
    import torch

    from reference_server.engine.config import EngineConfig
    from reference_server.engine.engine import Engine
    from engine_core.scheduling.sampling import SamplingParams

    torch.set_num_threads(1)
    engine = Engine(EngineConfig(model="tiny", max_model_len=2048))
    engine.warmup()
    if start_at is not None:
        time.sleep(max(0.0, start_at - time.time()))
    batch = 0
    results = []
    for _ in range(blocks):
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < block_s:
            for i in range(4):
                engine.add_request(f"b{batch}-{i}", [256] + [65] * 64, SamplingParams(max_tokens=32, ignore_eos=True))
            batch += 1
            while engine.has_unfinished_requests():
                engine.step()
                steps += 1
        results.append((time.perf_counter() - start) / steps * 1e3)
    return results


def spread(values: list[float]) -> str:
    return (f"{min(values):.2f}-{max(values):.2f} ms (max/min {max(values) / min(values):.2f}, "
            f"cv {statistics.pstdev(values) / statistics.mean(values):.1%})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.reference_server.drift", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=8, help="blocks timed in one process")
    parser.add_argument("--processes", type=int, default=8, help="fresh processes, one block each")
    parser.add_argument("--block-s", type=float, default=2.0, help="seconds per block")
    parser.add_argument("--cpu", type=int, default=None, help="pin to this core (default: not pinned)")
    parser.add_argument("--duet", action="store_true",
                        help="then two processes at once on the same core: the noise left between them")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if min(args.blocks, args.processes) < 1 or args.block_s <= 0:
        parser.error("--blocks and --processes must be >= 1 and --block-s positive")
    if args.cpu is not None:
        try:
            os.sched_setaffinity(0, {args.cpu})
        except (OSError, AttributeError) as exc:
            parser.error(f"--cpu {args.cpu}: cannot run there ({exc})")
    if args.child:
        print(json.dumps(time_blocks(args.blocks if args.start_at else 1, args.block_s, args.start_at)))
        return 0
    console = Console(stderr=True)
    console.print(f"one process: {args.blocks} blocks of {args.block_s:g} s")
    in_process = time_blocks(args.blocks, args.block_s)
    fresh = []
    for i in range(args.processes):
        console.print(f"fresh process {i + 1}/{args.processes}")
        command = [sys.executable, "-m", "lab.reference_server.drift", "--child", "--block-s", str(args.block_s)]
        if args.cpu is not None:
            command += ["--cpu", str(args.cpu)]
        fresh += json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    duet = None
    if args.duet:
        console.print(f"duet: two processes at once, {args.blocks} blocks of {args.block_s:g} s each")
        duet = run_duet(args)
    if args.json:
        print(json.dumps({"one_process_ms": in_process, "fresh_processes_ms": fresh, "duet_ms": duet}))
        return 0
    print("decode step, tiny preset, batch 4, 1 torch thread")
    print(f"  one process, {args.blocks} blocks: {' '.join(f'{v:.2f}' for v in in_process)}  -> {spread(in_process)}")
    print(f"  {args.processes} fresh processes:  {' '.join(f'{v:.2f}' for v in fresh)}  -> {spread(fresh)}")
    if duet is not None:
        adjacent = log_ratio_sd(in_process[:-1], in_process[1:])
        together = log_ratio_sd(*duet)
        print(f"  log ratio B/A: adjacent blocks of one process SD {adjacent:.1%} (interleaved pairs); "
              f"the same block in two processes at once SD {together:.1%} (duet pairs)")
    return 0


def run_duet(args: argparse.Namespace) -> list[list[float]]:
    """Two child processes timing the same `--blocks` instants (on `--cpu` when given)."""
    start_at = time.time() + 15.0   # both have loaded torch and warmed their engines by then
    command = [sys.executable, "-m", "lab.reference_server.drift", "--child", "--blocks", str(args.blocks),
               "--block-s", str(args.block_s), "--start-at", f"{start_at:.3f}"]
    if args.cpu is not None:
        command += ["--cpu", str(args.cpu)]
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [child.communicate()[0] for child in children]
    if any(child.returncode for child in children):
        raise SystemExit("a duet process failed")
    return [json.loads(out) for out in outputs]


def log_ratio_sd(a: list[float], b: list[float]) -> float:
    """Sample SD of log(b_i / a_i)."""
    ratios = [math.log(y / x) for x, y in zip(a, b)]
    return statistics.stdev(ratios) if len(ratios) > 1 else float("nan")


if __name__ == "__main__":
    raise SystemExit(main())
