"""The batching simulator: seeded, consistent with queueing theory and Little's law."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from calculators.batch_queue import batch_queue
from calculators.queueing import md1
from calculators.sim.simulate import (MeasuredLengths, SimServer, SimWorkload, simulate, simulate_levels,
                                      simulate_trace)
from calculators.sim.step_model import StepTimeModel
from contract.distributions import LengthDistribution
from engine_core.scheduling.strategies import STRATEGIES
from engine_core.scheduling.strategies.static import StaticLimits

MODEL = StepTimeModel(base_s=0.01, per_seq_s=0.0005, per_prefill_token_s=2e-5)
MIXED = dict(prompt_tokens=LengthDistribution.uniform(64, 256), output_tokens=LengthDistribution.uniform(16, 256))


def test_same_seed_same_answer_other_seed_other_answer():
    workload = SimWorkload(**MIXED, requests=500, rate_rps=4.0, seed=7)
    first = simulate(SimServer(), workload, MODEL)
    assert simulate(SimServer(), workload, MODEL) == first
    other = simulate(SimServer(), SimWorkload(**MIXED, requests=500, rate_rps=4.0, seed=8), MODEL)
    assert other.metrics != first.metrics


def test_no_batching_under_poisson_arrivals_is_an_md1_queue():
    prompt, output = 100, 20
    service = MODEL.step_s(1, prompt, prompt) + (output - 1) * MODEL.step_s(1)   # deterministic service time
    rate = 0.7 / service
    result = simulate(SimServer(strategy="none"),
                      SimWorkload(prompt_tokens=LengthDistribution.fixed(prompt),
                               output_tokens=LengthDistribution.fixed(output),
                               requests=8_000, rate_rps=rate, seed=3), MODEL)
    theory = md1(rate, 1 / service)
    assert result.metrics["e2e_s"]["mean"] == pytest.approx(theory.mean_response_s, rel=0.05)
    assert result.utilization == pytest.approx(0.7, rel=0.03)


def test_dynamic_batching_of_single_step_requests_is_the_batch_service_queue():
    model = StepTimeModel(base_s=0.02, per_seq_s=0.001)
    server = SimServer.from_flags("dynamic", max_batch_size=32, max_queue_delay_us=0)
    for rate in (20.0, 200.0):
        result = simulate(server, SimWorkload(prompt_tokens=LengthDistribution.fixed(1),
                                           output_tokens=LengthDistribution.fixed(1),
                                           requests=20_000, rate_rps=rate, seed=5), model)
        theory = batch_queue(rate, 0.02, 0.001, 32)
        assert result.metrics["e2e_s"]["mean"] == pytest.approx(theory.mean_response_s, rel=0.06)
        assert result.mean_batch_size == pytest.approx(theory.mean_batch_size, rel=0.15)


def test_closed_loop_obeys_littles_law():
    for strategy in ("none", "static", "dynamic", "continuous"):
        result = simulate(SimServer(strategy=strategy), SimWorkload(**MIXED, requests=1000, concurrency=8), MODEL)
        in_flight = result.request_rate_rps * result.metrics["e2e_s"]["mean"]
        assert in_flight == pytest.approx(8, rel=0.05), strategy


def test_synchronised_continuous_batch_decodes_at_the_step_time_of_its_size():
    result = simulate(SimServer(), SimWorkload(prompt_tokens=LengthDistribution.fixed(32),
                                               output_tokens=LengthDistribution.fixed(64),
                                               requests=400, concurrency=6), MODEL)
    assert result.metrics["tpot_s"]["p50"] == pytest.approx(MODEL.step_s(6))
    assert result.metrics["ttft_s"]["p50"] == pytest.approx(MODEL.step_s(6, 6 * 32, 6 * 32))
    assert result.mean_batch_size == pytest.approx(6, rel=0.01)   # the last round is short


def test_batching_buys_throughput_in_the_expected_order():
    levels = {strategy: simulate(SimServer.from_flags(strategy, batch_size=16, max_batch_size=16),
                                 SimWorkload(**MIXED, requests=1000, concurrency=16), MODEL)
              for strategy in ("none", "static", "continuous")}
    assert levels["continuous"].output_tokens_per_s > 1.3 * levels["static"].output_tokens_per_s
    assert levels["static"].output_tokens_per_s > 2 * levels["none"].output_tokens_per_s


def test_kv_blocks_limit_the_batch_as_in_the_engine():
    """300-token requests need 19 blocks of 16 at the end, 13 for the prompt: 40 blocks hold two whole."""
    workload = SimWorkload(prompt_tokens=LengthDistribution.fixed(200),
                        output_tokens=LengthDistribution.fixed(100), requests=200,
                        concurrency=8)
    static = simulate(SimServer.from_flags("static", batch_size=8, num_kv_blocks=40), workload, MODEL)
    assert static.mean_batch_size == pytest.approx(2.0, rel=0.02)   # worst case reserved at launch: two fit
    assert static.preemptions == 0
    continuous = simulate(SimServer(num_kv_blocks=40), workload, MODEL)
    assert continuous.preemptions > 0    # three prompts fit (39 blocks); growing, one is preempted
    assert continuous.mean_batch_size == pytest.approx(2.0, rel=0.01)   # then two run, staggered
    assert continuous.metrics["e2e_s"]["count"] == continuous.requests  # and every request finishes
    unlimited = simulate(SimServer(), workload, MODEL)
    assert unlimited.preemptions == 0 and unlimited.mean_batch_size == pytest.approx(8, rel=0.02)
    with pytest.raises(ValueError, match="cannot hold the longest request"):
        simulate(SimServer(num_kv_blocks=5), SimWorkload(**MIXED, requests=10, concurrency=1), MODEL)


def test_levels_share_lengths_and_latency_grows_with_load():
    results = simulate_levels(SimServer(), SimWorkload(**MIXED, requests=1000, rate_rps=1.0), MODEL,
                              rates=[2.0, 8.0, 16.0])
    assert [r.offered["rate_rps"] for r in results] == [2.0, 8.0, 16.0]
    p99s = [r.metrics["e2e_s"]["p99"] for r in results]
    assert p99s == sorted(p99s)
    keys = set(results[0].to_dict()["metrics"]["ttft_s"])
    assert keys == {"count", "mean", "p50", "p90", "p95", "p99"}


@pytest.mark.parametrize("call, message", [
    (lambda: SimWorkload(requests=10), "exactly one of concurrency"),
    (lambda: SimWorkload(requests=10, concurrency=2, rate_rps=1.0), "exactly one of concurrency"),
    (lambda: SimWorkload(requests=0, concurrency=2), "requests must be a positive integer"),
    (lambda: SimWorkload(requests=10, rate_rps=-1.0), "rate_rps must be positive"),
    (lambda: LengthDistribution.uniform(10, 5), "high \\(5\\) must be >= low \\(10\\)"),
    (lambda: LengthDistribution.from_values((3, -1)), "positive integers"),
    (lambda: SimWorkload(lengths=((3, 0),), concurrency=1), "pairs of positive integers"),
    (lambda: SimServer(strategy="greedy"), "strategy must be one of"),
    (lambda: SimServer.from_flags(max_num_seqs=0), "max_num_seqs must be a positive integer"),
    (lambda: SimServer.from_flags("dynamic", preferred_batch_sizes=(4, 64)), "preferred_batch_sizes"),
    (lambda: SimServer.from_flags("static", batch_sizes=4), "unknown batching limit"),
    (lambda: SimServer(strategy="none", limits=StaticLimits()), "belongs to strategy 'static'"),
    (lambda: SimServer(num_kv_blocks=0), "num_kv_blocks must be a positive integer"),
])
def test_bad_simulation_input_names_the_field(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_measured_lengths_are_drawn_together_or_replayed_in_order_and_checked_once():
    pairs = ((10, 1), (20, 2), (30, 3))
    workload = SimWorkload(lengths=pairs, concurrency=1)
    prompt, output, reasoning = workload.sample_lengths(np.random.default_rng(0), 300)
    assert set(zip(prompt.tolist(), output.tolist())) == set(pairs) and not reasoning.any()
    assert replace(workload, seed=5).lengths is workload.lengths   # a replication does not check them again
    replay = SimWorkload(lengths=MeasuredLengths(pairs, in_order=True), concurrency=1)
    prompt, output, _ = replay.sample_lengths(np.random.default_rng(0), 5)
    assert prompt.tolist() == [10, 20, 30, 10, 20] and output.tolist() == [1, 2, 3, 1, 2]


def test_step_jitter_is_seeded_and_spreads_single_steps_more_than_averages():
    factors = (0.5, 1.0, 1.5)                       # mean 1: the mean step is unchanged
    jittery = StepTimeModel(base_s=0.01, per_seq_s=0.0005, jitter=factors)
    workload = SimWorkload(prompt_tokens=LengthDistribution.fixed(16),
                        output_tokens=LengthDistribution.fixed(64), requests=600,
                        concurrency=4, seed=1)
    first = simulate(SimServer(), workload, jittery)
    assert simulate(SimServer(), workload, jittery) == first
    steady = simulate(SimServer(), workload, StepTimeModel(base_s=0.01, per_seq_s=0.0005))
    assert first.metrics["tpot_s"]["mean"] == pytest.approx(steady.metrics["tpot_s"]["mean"], rel=0.03)
    ttft = first.metrics["ttft_s"]
    assert ttft["p99"] / ttft["p50"] > 1.3 > first.metrics["tpot_s"]["p99"] / first.metrics["tpot_s"]["p50"]


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_a_lone_request_takes_its_prefill_then_one_step_per_token_with_the_context_it_attends(strategy):
    """Closed form of one request at a time: first token after the prefill step over the whole
    prompt; then decode step j attends prompt + j tokens. Requests arrive 1000 s apart, so none
    waits (static launches its single request at the batch timeout)."""
    model = StepTimeModel(base_s=0.01, per_seq_s=0.0005, per_prefill_token_s=2e-5, per_context_token_s=1e-6)
    prompt, output = 100, 20
    workload = SimWorkload(prompt_tokens=LengthDistribution.fixed(prompt), output_tokens=LengthDistribution.fixed(output),
                        requests=3, rate_rps=0.001, arrival_cv2=1e-9, warmup_fraction=0.0)
    trace = simulate_trace(SimServer(strategy=strategy), workload, model)
    launch = {"static": SimServer(strategy="static").limits.batch_timeout_s,
              "dynamic": SimServer(strategy="dynamic").limits.max_queue_delay_s}.get(strategy, 0.0)
    ttft = launch + model.step_s(1, prompt, prompt)
    e2e = ttft + sum(model.step_s(1, 0, prompt + j) for j in range(1, output))
    assert trace.first_token - trace.arrival == pytest.approx([ttft] * 3, rel=1e-9)
    assert trace.end - trace.arrival == pytest.approx([e2e] * 3, rel=1e-9)
    assert trace.steps == 3 * output and trace.sequences_in_steps == 3 * output


def _closed_loop_first_tokens(*, budget: int, with_decodes: int, chunked: bool, outputs: int, requests: int,
                              concurrency: int) -> list[float]:
    """Sorted TTFTs of 2000-token prompts in a closed loop, steps of 10 ms + 10 us a prompt token."""
    from calculators.sim.simulate import simulate_trace
    from calculators.sim.step_model import StepTimeModel

    server = SimServer.from_flags("continuous", max_num_seqs=64, max_num_batched_tokens=budget,
                                  max_prefill_tokens_with_decodes=with_decodes, chunked_prefill=chunked,
                                  num_kv_blocks=4096, block_size=16)
    model = StepTimeModel(base_s=0.01, per_seq_s=0.0, per_prefill_token_s=1e-5, per_context_token_s=0.0)
    workload = SimWorkload(prompt_tokens=LengthDistribution.fixed(2000), output_tokens=LengthDistribution.fixed(outputs),
                           requests=requests, concurrency=concurrency)
    trace = simulate_trace(server, workload, model)
    return sorted(trace.first_token - trace.arrival)


@pytest.mark.parametrize("chunked, first_tokens", [
    (False, [0.09] * 4 + [0.18] * 4 + [0.23] * 2),         # whole prompts: 4, 4, then 2 a step
    (True, [0.09192] * 4 + [0.1838] * 4 + [0.23] * 2),   # chunked: every token of the budget, the 5th and 9th split
])
def test_a_closed_loop_wave_prefills_as_the_engines_budget_allows(chunked, first_tokens):
    assert _closed_loop_first_tokens(budget=8192, with_decodes=0, chunked=chunked, outputs=4, requests=10,
                                     concurrency=10) == pytest.approx(first_tokens)


def test_a_closed_loop_resend_misses_the_step_that_starts_as_it_is_sent():
    # budget 4096, whole prompts: A and B prefill in step 1 (0.05 s), C beside their last decodes in step 2 (0.03 s);
    # A and B finish as step 3 starts and send again with no front-end delay: step 3 is C's decode alone (0.01 s),
    # and A', B' prefill in step 4 (TTFT 0.06 s), where joining step 3 would have given them 0.05 s
    assert _closed_loop_first_tokens(budget=4096, with_decodes=4096, chunked=False, outputs=2, requests=5,
                                     concurrency=3) == pytest.approx([0.05, 0.05, 0.06, 0.06, 0.08])
