"""A fleet's replica (`ReplicaSim`) is the simulator's engine loop, cut at the fleet's events: fed one
request at a time, it gives the run `simulate_trace` gives for the same open-loop arrivals, float for float."""

from __future__ import annotations

import numpy as np
import pytest

from calculators.plan.replica import ReplicaSim
from calculators.sim.simulate import SimServer, SimWorkload, simulate_trace
from calculators.sim.step_model import StepTimeModel
from contract.distributions import LengthDistribution
from engine_core.scheduling.strategies import BUILT_IN

MODEL = StepTimeModel(base_s=0.002, per_seq_s=0.0002, per_prefill_token_s=1e-5, per_context_token_s=1e-7,
                      jitter=tuple(np.linspace(0.6, 1.8, 97)), jitter_block=8)


def _replica_run(server, workload, trace, kv_blocks, shared_prefixes=True):
    rng = np.random.default_rng(workload.seed)   # the step clock's draws come after the workload's, as there
    workload.sample_lengths(rng, workload.requests)
    workload.open_loop_arrivals(rng)
    replica = ReplicaSim(server, MODEL, num_kv_blocks=kv_blocks, rng=rng, shared_prefixes=shared_prefixes)
    first, end = np.full(len(trace.prompt), np.nan), np.full(len(trace.prompt), np.nan)
    for i in np.argsort(trace.arrival, kind="stable"):
        t = float(trace.arrival[i])
        replica.advance(t)
        replica.submit(int(i), [int(i)] * int(trace.prompt[i]), int(trace.output[i]), t)
    replica.advance(np.inf)
    for i, when in replica.first_tokens:
        first[i] = when
    for i, when in replica.ended:
        end[i] = when
    return first, end, replica


@pytest.mark.parametrize("strategy", BUILT_IN)
@pytest.mark.parametrize("kv_blocks", [None, 14])
@pytest.mark.parametrize("shared_prefixes", [True, False])   # distinct prompts: registering late, the same run
def test_fed_one_request_at_a_time_it_replays_the_simulator(strategy, kv_blocks, shared_prefixes):
    server = SimServer.from_flags(strategy, num_kv_blocks=kv_blocks)
    workload = SimWorkload(prompt_tokens=LengthDistribution.uniform(8, 64), output_tokens=LengthDistribution.uniform(4, 80),
                        requests=300, rate_rps=150.0, seed=3)
    trace = simulate_trace(server, workload, MODEL)
    blocks = kv_blocks or int(np.ceil((trace.prompt + trace.output).max() / 16)) * min(server.limits.max_running, 300)
    first, end, replica = _replica_run(server, workload, trace, blocks, shared_prefixes)
    np.testing.assert_array_equal(first, trace.first_token)
    np.testing.assert_array_equal(end, trace.end)
    assert replica.steps == trace.steps and replica.preemptions == trace.preemptions
    assert replica.busy_s == pytest.approx(trace.busy_s)


def test_shared_leading_tokens_hit_the_prefix_cache():
    server = SimServer.from_flags("continuous", num_kv_blocks=200)
    replica = ReplicaSim(server, MODEL, num_kv_blocks=200)
    shared = [7] * 64
    replica.submit(0, shared + [100] * 16, 4, 0.0)
    replica.advance(1.0)
    replica.submit(1, shared + [101] * 16, 4, 1.0)
    replica.advance(2.0)
    assert replica.block_manager.prefix_cache_hit_tokens >= 64
    assert [i for i, _ in replica.ended] == [0, 1] and replica.running == replica.waiting == 0


def test_its_metrics_show_the_last_finished_step_not_a_prefill_still_running():
    # steps of 10 ms + 1 ms per prompt token: a 100-token prompt prefills in 110 ms, a decode step is 10 ms
    model = StepTimeModel(base_s=0.01, per_seq_s=0.0, per_prefill_token_s=0.001, per_context_token_s=0.0)
    server = SimServer.from_flags("continuous", num_kv_blocks=200)
    replica = ReplicaSim(server, model, num_kv_blocks=200)
    replica.submit(0, [1] * 100, 50, 0.0)
    replica.advance(0.2)                          # prefilled by 0.11, a decode step each 10 ms since
    assert replica.now == pytest.approx(0.2) and replica.gauges(0.2)[1:3] == (1, 0)
    for i in (1, 2, 3):                           # three more arrive at 0.2: one step prefills their 180
        replica.submit(i, [10 + i] * 60, 5, 0.2)  # tokens beside request 0's decode, 0.2 to 0.39 s
    replica.advance(0.25)
    assert replica.now == pytest.approx(0.39) and replica.running == 4
    shown = replica.gauges(0.25)                  # mid-prefill: what the decode step before it left
    assert (shown.running, shown.waiting) == (1, 0) and shown.t_s == pytest.approx(0.2)
    assert replica.gauges(replica.now)[1:3] == (4, 0)   # once it ends, all four
