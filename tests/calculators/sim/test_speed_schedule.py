"""The machine's speed over a simulated run (a level measured in rounds, each at its own speed)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from calculators.sim.front_end import FrontEnd
from calculators.sim.simulate import SimServer, SimWorkload, simulate, simulate_trace
from calculators.sim.state import StepClock
from calculators.sim.step_model import StepTimeModel

MODEL = StepTimeModel(base_s=0.001, per_seq_s=0.0001, per_context_token_s=1e-6)


def test_each_step_takes_the_factor_in_force_at_its_start():
    clock = StepClock(MODEL, np.random.default_rng(0), speeds=((0.0, 1.0), (1.0, 2.0)))
    clock.now = 0.5
    assert clock.step(2, 0, 100) == pytest.approx(MODEL.step_s(2, 0, 100))
    clock.now = 1.0
    assert clock.step(2, 0, 100) == pytest.approx(2 * MODEL.step_s(2, 0, 100))
    assert clock.decode_durations(2, 100, 3) == pytest.approx(2 * np.array([MODEL.step_s(2, 0, c) for c in (100, 102, 104)]))
    before = StepClock(MODEL, np.random.default_rng(0), speeds=((1.0, 3.0),))
    assert before.step(1) == pytest.approx(MODEL.step_s(1))     # before the first entry: the usual speed


def test_requests_in_the_slow_half_of_a_run_take_twice_as_long():
    server = SimServer.from_flags("continuous", max_num_seqs=8)
    workload = SimWorkload(lengths=((32, 24),), concurrency=4, requests=4000, warmup_s=1.0, duration_s=8.0, seed=3)
    trace = simulate_trace(server, workload, MODEL, speeds=((0.0, 1.0), (5.0, 2.0)))
    send, e2e = trace.client_send, trace.client_e2e()
    fast = np.isfinite(e2e) & (send > 1.0) & (send + e2e < 5.0)
    slow = np.isfinite(e2e) & (send > 5.0) & (send < 9.0)
    assert np.median(e2e[slow]) == pytest.approx(2 * np.median(e2e[fast]), rel=0.05)


def test_one_factor_throughout_is_the_model_scaled_by_it():
    server = SimServer.from_flags("continuous", max_num_seqs=8)
    workload = SimWorkload(lengths=((32, 24), (64, 8)), concurrency=4, requests=2000, warmup_s=1.0, duration_s=5.0, seed=1)
    scheduled = simulate(server, workload, MODEL, speeds=((0.0, 1.5),))
    scaled = simulate(server, workload, MODEL.scaled(1.5))
    for metric in ("ttft_s", "tpot_s", "e2e_s"):
        assert scheduled.metrics[metric]["p50"] == pytest.approx(scaled.metrics[metric]["p50"], rel=1e-6)


def test_slow_paths_are_replayed_on_the_wall_clock():
    constant = StepTimeModel(base_s=0.001, slow_paths=((2.0,),), slow_bin_s=0.25)
    clock = StepClock(constant, np.random.default_rng(0))
    assert clock.step(1) == pytest.approx(0.002)
    two_bins = StepTimeModel(base_s=0.001, slow_paths=((1.0, 3.0),), slow_bin_s=0.25)
    factors = set()
    for seed in range(20):
        clock = StepClock(two_bins, np.random.default_rng(seed))
        clock.now = 0.1
        first = clock.step(1) / 0.001
        clock.now = 0.35
        factors.add((round(first, 9), round(clock.step(1) / 0.001, 9)))
    # paths drawn whole and end to end: bin k+1 follows bin k (1 -> 3, or 3 -> the next path's 1)
    assert factors <= {(1.0, 3.0), (3.0, 1.0)} and len(factors) == 2


def test_a_long_slow_stretch_widens_a_queue_s_tail_that_shuffled_steps_average_away():
    """A TTFT that waits behind 7 requests sums hundreds of steps: a machine slow for seconds at a
    time (here 1.8x for 1 s in 5) moves it, the same factors drawn step by step hardly do."""
    path = (1.0,) * 16 + (1.8,) * 4
    server = SimServer.from_flags("none")
    workload = SimWorkload(lengths=((16, 32),), concurrency=8, requests=6000, seed=2)
    base = StepTimeModel(base_s=0.001, per_context_token_s=1e-6)
    slow = simulate(server, workload, replace(base, slow_paths=(path,), slow_bin_s=0.25))
    shuffled = simulate(server, workload, replace(base, jitter=path))
    spread = {name: r.metrics["ttft_s"]["p99"] / r.metrics["ttft_s"]["p50"] for name, r in
              (("slow", slow), ("shuffled", shuffled))}
    assert spread["slow"] > 1.3 * spread["shuffled"]


def test_the_steps_after_a_wait_take_the_warm_up_in_order():
    warm = replace(MODEL, warm_up=(2.0, 1.5, 1.25))
    clock = StepClock(warm, np.random.default_rng(0))
    # the run starts idle: its first three steps are warm, the fourth is not
    assert [clock.step(1) / MODEL.step_s(1) for _ in range(4)] == pytest.approx([2.0, 1.5, 1.25, 1.0])
    clock.idle()
    assert clock.step(1) == pytest.approx(2.0 * MODEL.step_s(1))
    # a stretch of decodes at once takes the rest of the curve, and consuming it moves past it
    assert clock.decode_durations(2, 100, 3) == pytest.approx(
        [1.5 * MODEL.step_s(2, 0, 100), 1.25 * MODEL.step_s(2, 0, 102), MODEL.step_s(2, 0, 104)])
    clock.consume(3)
    assert clock.step(1) == pytest.approx(MODEL.step_s(1))


def test_a_closed_loop_at_one_user_pays_the_warm_up_at_every_prefill():
    """One user, 1 ms between a response and the next request reaching the engine: the engine waits
    before every request, so each prefill (the engine's TTFT) is a first step after a wait."""
    server = SimServer.from_flags("continuous", max_num_seqs=8)
    workload = SimWorkload(lengths=((32, 24),), concurrency=1, requests=200, seed=3)
    front = FrontEnd((0.001,), (0.0,), (0.0,))
    traces = {name: simulate_trace(server, workload, model, front)
              for name, model in (("cold", MODEL), ("warm", replace(MODEL, warm_up=(1.4, 1.2))))}
    engine_ttft = {name: t.first_token - t.arrival for name, t in traces.items()}
    np.testing.assert_allclose(engine_ttft["warm"], 1.4 * engine_ttft["cold"], rtol=1e-9)
    decode = {name: t.end - t.first_token for name, t in traces.items()}   # 23 decode steps, the first at 1.2x
    first = MODEL.step_s(1, 0, 33)
    np.testing.assert_allclose(decode["warm"] - decode["cold"], 0.2 * first, rtol=1e-6)
