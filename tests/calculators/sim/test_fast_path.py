"""The simulator's fast path for steady decode stretches gives the same run as stepping, float for float.

Every strategy; open and closed loop; with and without a KV cache small enough to preempt; with
block-bootstrapped step jitter, front-end delays and a time window; with the machine's slow speed
paths (a stretch that crosses a bin is cut there, as stepping takes each step's bin). Compared: every request's engine
arrival, first token, first answer token (after its reasoning) and end, the client-side times, and the run's step, sequence, busy-time and
preemption counters (the fast path must use the same jitter draws in the same order).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from calculators.sim.front_end import FrontEnd
from calculators.sim.simulate import SimServer, SimWorkload, simulate_trace
from calculators.sim.step_model import StepTimeModel
from contract.distributions import LengthDistribution
from engine_core.scheduling.strategies import BUILT_IN

MODEL = StepTimeModel(base_s=0.002, per_seq_s=0.0002, per_prefill_token_s=1e-5, per_context_token_s=1e-7,
                      jitter=tuple(np.linspace(0.6, 1.8, 97)), jitter_block=8, batch_table=(0.0021, 0.0024, 0.0026))
FRONT = FrontEnd((0.001, 0.0004, 0.003), (0.0005, 0.0002, 0.002), (0.0003, 0.0001, 0.001), think_s=0.0002)
# reasoning too: the first answer token lands inside a steady stretch as often as outside one
LENGTHS = dict(prompt_tokens=LengthDistribution.uniform(8, 64), output_tokens=LengthDistribution.uniform(4, 80),
               reasoning_tokens=LengthDistribution.uniform(1, 60))
FIELDS = ("arrival", "first_token", "end", "client_send", "first_out", "last_out", "first_answer")


# the machine's slow speed too: bins short enough that steady stretches cross them
SLOW = replace(MODEL, slow_paths=((1.0, 1.7, 0.9, 1.3), (2.0, 0.8)), slow_bin_s=0.003)


def both(server: SimServer, workload: SimWorkload, front: FrontEnd | None, model: StepTimeModel = MODEL):
    return (simulate_trace(server, workload, model, front, fast_decodes=True),
            simulate_trace(server, workload, model, front, fast_decodes=False))


@pytest.mark.parametrize("strategy", BUILT_IN)
@pytest.mark.parametrize("kv_blocks", [None, 14])
@pytest.mark.parametrize("load", ["closed", "open", "window"])
def test_fast_path_replays_stepping_exactly(strategy, kv_blocks, load):
    server = SimServer.from_flags(strategy, num_kv_blocks=kv_blocks, max_num_seqs=6, batch_size=4,
                                     max_batch_size=4, batch_timeout_ms=1.0)
    workload = {"closed": SimWorkload(**LENGTHS, requests=300, concurrency=6, seed=3),
                "open": SimWorkload(**LENGTHS, requests=300, rate_rps=150.0, seed=4),
                "window": SimWorkload(**LENGTHS, requests=100, concurrency=5, warmup_s=0.2, duration_s=2.0, seed=5)}[load]
    fast, stepped = both(server, workload, FRONT if load != "open" else None)
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(fast, name), getattr(stepped, name), err_msg=name)
    assert (fast.steps, fast.sequences_in_steps, fast.busy_s, fast.preemptions) == \
        (stepped.steps, stepped.sequences_in_steps, stepped.busy_s, stepped.preemptions)
    if kv_blocks and strategy == "continuous" and load == "closed":
        assert fast.preemptions > 0   # the small cache did make it preempt


@pytest.mark.parametrize("strategy", BUILT_IN)
@pytest.mark.parametrize("load", ["closed", "window"])
def test_fast_path_replays_stepping_exactly_under_slow_speed_paths(strategy, load):
    server = SimServer.from_flags(strategy, max_num_seqs=6, batch_size=4, max_batch_size=4, batch_timeout_ms=1.0)
    workload = {"closed": SimWorkload(**LENGTHS, requests=300, concurrency=6, seed=3),
                "window": SimWorkload(**LENGTHS, requests=100, concurrency=5, warmup_s=0.2, duration_s=2.0, seed=5)}[load]
    fast, stepped = both(server, workload, FRONT, SLOW)
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(fast, name), getattr(stepped, name), err_msg=name)
    assert (fast.steps, fast.busy_s) == (stepped.steps, stepped.busy_s)
    plain = simulate_trace(server, workload, MODEL, FRONT)
    assert not np.array_equal(plain.end, fast.end)   # the paths did change the run


# the engine's warm-up after a wait too: a stretch that starts within the warm steps takes them
WARM = replace(SLOW, warm_up=(1.6, 1.3, 1.2, 1.1) + (1.05,) * 12)


@pytest.mark.parametrize("strategy", BUILT_IN)
@pytest.mark.parametrize("load", ["closed-1", "open"])
def test_fast_path_replays_stepping_exactly_with_warm_up(strategy, load):
    server = SimServer.from_flags(strategy, max_num_seqs=6, batch_size=4, max_batch_size=4, batch_timeout_ms=1.0)
    workload = {"closed-1": SimWorkload(**LENGTHS, requests=200, concurrency=1, seed=6),   # waits before every request
                "open": SimWorkload(**LENGTHS, requests=200, rate_rps=40.0, seed=7)}[load]
    fast, stepped = both(server, workload, FRONT, WARM)
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(fast, name), getattr(stepped, name), err_msg=name)
    assert (fast.steps, fast.busy_s) == (stepped.steps, stepped.busy_s)
    cold = simulate_trace(server, workload, SLOW, FRONT)
    assert not np.array_equal(cold.end, fast.end)   # the warm-up did change the run
