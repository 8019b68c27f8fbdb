"""The simulator against the real engine (tiny preset, CPU, in-process, closed loop).

Test: with a unit step time, the simulator must replay the engine's schedule step for step:
the step at which every request gets its first token and its last, for each strategy.
Timing accuracy on this shared 2-core machine is noise-bound, so it is a script, not a test:
    .venv/bin/python tests/calculators/sim/test_sim_vs_engine.py [--runs N]
calibrates a step-time model on a short measurement (concurrency 1 and 8), then measures
concurrency 1, 4, 8 and prints measured vs simulated p50 TTFT and TPOT with relative errors.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3])) if __name__ == "__main__" else None

from calculators.sim.calibrate import fit_step_model  # noqa: E402
from calculators.sim.front_end import FrontEnd  # noqa: E402
from calculators.sim.simulate import MeasuredLengths, SimServer, SimWorkload, simulate, simulate_trace  # noqa: E402
from calculators.sim.step_model import StepTimeModel  # noqa: E402

import reference_server.engine.engine as engine_module  # noqa: E402
from reference_server.engine.config import EngineConfig  # noqa: E402
from engine_core.scheduling.sampling import SamplingParams  # noqa: E402

WARMUP_FRACTION = 0.1
PROMPT_TOKENS = np.random.default_rng(2024)   # one stream for the whole process: prompts never repeat


@dataclass
class Measurement:
    """Per request (send order): lengths and ttft/tpot; per step: sequences, prefill tokens, interval."""

    prompt: np.ndarray
    output: np.ndarray
    ttft: np.ndarray
    tpot: np.ndarray
    step_batch: np.ndarray
    step_prefill: np.ndarray
    step_s: np.ndarray
    first_step: np.ndarray   # engine step (1-based) that produced the first token
    end_step: np.ndarray     # engine step that produced the last token


LIMITS = dict(max_num_seqs=32, max_num_batched_tokens=2048, batch_size=4, batch_timeout_ms=5.0,
              max_batch_size=4, max_queue_delay_us=0)   # every strategy's, for the engine and the simulator


def make_engine(strategy: str = "continuous"):
    engine = engine_module.Engine(EngineConfig.from_flags(model="tiny", dtype="float32", strategy=strategy,
                                                          num_threads=1, **LIMITS))
    engine.warmup()
    prefills: list[int] = []
    run = engine.runner.run

    def counting_run(batch):  # instrumentation only: records the step's prompt tokens, then runs it
        prefills.append(sum(n for n, seq in zip(batch.num_new_tokens, batch.seqs)
                            if seq.num_computed_tokens < seq.num_prompt_tokens))
        return run(batch)

    engine.runner.run = counting_run
    return engine, prefills


def measure_closed_loop(engine, prefills: list[int], concurrency: int, prompt: np.ndarray,
                        output: np.ndarray, clock=time.perf_counter) -> Measurement:
    """``concurrency`` users send back to back (no think time) until every request has been sent.

    ``clock``: wall time (``time.perf_counter``) or this thread's CPU time (``time.thread_time``:
    the engine runs in this thread with one torch thread, so that clock leaves out the time other
    jobs on a shared machine take the core away)."""
    n = len(prompt)
    start, first = np.zeros(n), np.full(n, np.nan)
    end = np.full(n, np.nan)
    first_step, end_step = np.zeros(n, dtype=int), np.zeros(n, dtype=int)
    batches, intervals, sent, step = [], [], 0, 0
    prefills.clear()

    def send() -> None:
        nonlocal sent
        start[sent] = clock()
        ids = PROMPT_TOKENS.integers(1, 250, size=int(prompt[sent])).tolist()  # random: no prefix-cache hits
        engine.add_request(str(sent), ids, SamplingParams(max_tokens=int(output[sent]), ignore_eos=True,
                                                          temperature=0.0))
        sent += 1

    for _ in range(min(concurrency, n)):
        send()
    last = clock()
    while engine.has_unfinished_requests():
        steps_before = engine.stats().total_steps
        outputs = engine.step()
        now = clock()
        if engine.stats().total_steps == steps_before:
            continue   # nothing ran: a batch is still forming
        step += 1
        batches.append(engine.stats().last_batch_size)
        intervals.append(now - last)
        last = now
        for out in outputs:
            i = int(out.request_id)
            if np.isnan(first[i]):
                first[i], first_step[i] = now, step
            if out.finished:
                end[i], end_step[i] = now, step
                if sent < n:
                    send()
    ttft = first - start
    with np.errstate(invalid="ignore"):
        tpot = np.where(output > 1, (end - first) / (output - 1), np.nan)
    return Measurement(prompt, output, ttft, tpot, np.array(batches), np.array(prefills), np.array(intervals),
                       first_step, end_step)


def window(values: np.ndarray, concurrency: int) -> np.ndarray:
    """The simulator's measure window: skip warm-up requests and the closed-loop tail."""
    n = len(values)
    return values[int(n * WARMUP_FRACTION): n - concurrency]


def lengths(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.integers(16, 129, size=n), rng.integers(8, 49, size=n)


def compare(concurrencies=(1, 4, 8), requests=(24, 48, 64), calibration_requests=24, seed=0,
            clock=time.perf_counter) -> list[dict]:
    """Calibrate on concurrency 1 and 8, then measure and simulate each level; relative p50 errors."""
    rng = np.random.default_rng(seed)
    engine, prefills = make_engine()
    measure_closed_loop(engine, prefills, 4, *lengths(rng, 12), clock=clock)   # warm-up: first shapes are slow
    steps = [measure_closed_loop(engine, prefills, c, *lengths(rng, calibration_requests), clock=clock)
             for c in (1, 8)]
    model = fit_step_model(np.concatenate([m.step_batch for m in steps]), np.concatenate([m.step_s for m in steps]),
                           prefill_tokens=np.concatenate([m.step_prefill for m in steps]), jitter_points=256)
    rows = []
    for c, n in zip(concurrencies, requests):
        prompt, output = lengths(rng, n)
        measured = measure_closed_loop(engine, prefills, c, prompt, output, clock=clock)
        workload = SimWorkload(lengths=MeasuredLengths(tuple(zip(prompt, output)), in_order=True), requests=n,
                            concurrency=c, warmup_fraction=WARMUP_FRACTION, seed=seed)
        predicted = simulate(SimServer.from_flags("continuous", **LIMITS), workload, model, FrontEnd.in_process())
        row = {"concurrency": c, "model": model}
        for metric, values in (("ttft_s", measured.ttft), ("tpot_s", measured.tpot)):
            real = float(np.nanpercentile(window(values, c), 50))
            sim = predicted.p50(metric)
            row[metric] = (real, sim, abs(sim - real) / real)
        rows.append(row)
    return rows


@pytest.mark.parametrize("strategy, concurrency", [
    ("none", 2), ("static", 4), ("static", 6), ("dynamic", 3), ("dynamic", 8),
    ("continuous", 1), ("continuous", 4), ("continuous", 8),
])
def test_simulator_replays_the_engine_schedule_step_for_step(strategy, concurrency):
    rng = np.random.default_rng(concurrency)
    prompt, output = rng.integers(1, 80, size=20), rng.integers(1, 24, size=20)
    engine, prefills = make_engine(strategy)
    measured = measure_closed_loop(engine, prefills, concurrency, prompt, output)
    workload = SimWorkload(lengths=MeasuredLengths(tuple(zip(prompt, output)), in_order=True), requests=len(prompt),
                        concurrency=concurrency)
    server = SimServer.from_flags(strategy, num_kv_blocks=engine.num_kv_blocks, block_size=engine.config.block_size,
                                     **LIMITS)
    # the driver above adds each next request between two steps, as no server could
    trace = simulate_trace(server, workload, StepTimeModel(base_s=1.0), FrontEnd.in_process())
    np.testing.assert_array_equal(trace.first_token.round().astype(int), measured.first_step)
    np.testing.assert_array_equal(trace.end.round().astype(int), measured.end_step)
    assert len(measured.step_batch) == round(float(np.nanmax(trace.end)))
    assert engine.stats().kv_blocks_used == 0


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="simulator vs the real engine: p50 TTFT/TPOT errors")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: this thread's CPU time, i.e. without other jobs' share of a busy machine")
    parser.add_argument("--runs", type=int, default=1)
    options = parser.parse_args()
    clock = time.perf_counter if options.clock == "wall" else time.thread_time
    errors: dict[tuple[int, str], list[float]] = {}
    for run in range(options.runs):
        results = compare(seed=run, clock=clock)
        model = results[0]["model"]
        print(f"run {run} ({options.clock} clock) step model: base {model.base_s * 1e3:.3f} ms + "
              f"{model.per_seq_s * 1e3:.3f} ms/seq + {model.per_prefill_token_s * 1e6:.2f} us/prompt token; "
              f"jitter p50 {np.median(model.jitter):.2f}")
        print(f"{'c':>3} {'metric':>7} {'measured_ms':>12} {'simulated_ms':>13} {'rel_err':>8}")
        for row in results:
            for metric in ("ttft_s", "tpot_s"):
                real, sim, error = row[metric]
                errors.setdefault((row["concurrency"], metric), []).append(error)
                print(f"{row['concurrency']:>3} {metric:>7} {real * 1e3:12.3f} {sim * 1e3:13.3f} {error:8.1%}")
    if options.runs > 1:
        print("median relative error over runs:")
        for (c, metric), values in errors.items():
            print(f"  c={c} {metric}: {np.median(values):.1%}")
