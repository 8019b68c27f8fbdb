"""A reasoning model in the simulator: its answer's first token comes `reasoning` decode steps after its
first token, and the client's time to it (ttfa_s) is judged like TTFT; without reasoning it is TTFT."""

from __future__ import annotations

import numpy as np
import pytest

from calculators.sim.front_end import FrontEnd
from calculators.sim.replicate import simulate_replicated
from calculators.sim.simulate import MeasuredLengths, SimServer, SimWorkload, simulate, simulate_trace
from calculators.sim.step_model import StepTimeModel
from contract.distributions import LengthDistribution

FLAT = StepTimeModel(base_s=0.004, per_seq_s=0.0)   # every step 4 ms, whatever it holds
FRONT = FrontEnd((0.001,), (0.0005,), (0.0003,))


def _one_at_a_time(reasoning: int | None, output: int = 40) -> SimWorkload:
    return SimWorkload(prompt_tokens=LengthDistribution.fixed(16), output_tokens=LengthDistribution.fixed(output),
                    reasoning_tokens=None if reasoning is None else LengthDistribution.fixed(reasoning),
                    requests=50, concurrency=1, seed=2)


def test_the_answer_starts_one_decode_step_per_reasoning_token_after_the_first_token():
    result = simulate(SimServer(), _one_at_a_time(24), FLAT, FRONT)
    ttft, ttfa = result.metrics["ttft_s"]["p50"], result.metrics["ttfa_s"]["p50"]
    assert ttft == pytest.approx(0.001 + 0.004 + 0.0005)          # in + the prefill step + first_out
    assert ttfa - ttft == pytest.approx(24 * 0.004)               # token 25 is the 24th decode
    assert result.engine_metrics["ttfa_s"]["p50"] == pytest.approx(0.004 * 25)
    # the reasoning is output like the rest: E2E does not change with how much of it reasoned
    plain = simulate(SimServer(), _one_at_a_time(None), FLAT, FRONT)
    assert result.metrics["e2e_s"]["p50"] == pytest.approx(plain.metrics["e2e_s"]["p50"])


def test_without_reasoning_the_first_answer_token_is_the_first_token():
    result = simulate(SimServer(), SimWorkload(requests=300, concurrency=4, seed=1),
                      StepTimeModel(base_s=0.002, per_seq_s=0.0003, jitter=(0.7, 1.0, 1.3)), FRONT)
    assert result.metrics["ttfa_s"] == result.metrics["ttft_s"]


def test_a_request_that_reasons_for_all_its_output_has_no_answer_token():
    trace = simulate_trace(SimServer(), _one_at_a_time(80, output=40), FLAT)   # capped at the output: 40
    assert (trace.reasoning == 40).all() and np.isnan(trace.first_answer).all()
    assert simulate(SimServer(), _one_at_a_time(80, output=40), FLAT).metrics["ttfa_s"]["count"] == 0


def test_under_load_the_answer_waits_for_the_reasoning_of_a_fuller_batch():
    """At 8 streams the decode steps are longer (per_seq_s), so the wait for the answer grows with the load."""
    model = StepTimeModel(base_s=0.002, per_seq_s=0.0005)
    work = dict(prompt_tokens=LengthDistribution.fixed(16), output_tokens=LengthDistribution.fixed(64),
                reasoning_tokens=LengthDistribution.fixed(48), requests=400, seed=3)
    gaps = [(lambda r: r.metrics["ttfa_s"]["p50"] - r.metrics["ttft_s"]["p50"])(
        simulate(SimServer(), SimWorkload(**work, concurrency=c), model)) for c in (1, 8)]
    assert gaps[0] == pytest.approx(48 * 0.0025, rel=1e-9)
    assert gaps[1] == pytest.approx(48 * (0.002 + 8 * 0.0005), rel=0.05)


def test_measured_rows_carry_their_reasoning_and_replications_summarise_ttfa():
    rows = ((16, 40, 30), (16, 40, 0), (32, 20, 10))
    lengths = MeasuredLengths(rows, in_order=True)
    prompt, output, reasoning = lengths.sample(np.random.default_rng(0), 4)
    assert reasoning.tolist() == [30, 0, 10, 30] and output.tolist() == [40, 40, 20, 40]
    replicated = simulate_replicated(SimServer(), SimWorkload(lengths=rows, requests=120, concurrency=2), FLAT,
                                     replications=3)
    assert replicated.value("ttfa_s", "p99") > replicated.value("ttft_s", "p99")


@pytest.mark.parametrize("call, message", [
    (lambda: MeasuredLengths(((16, 10, 11),)), "at most the output tokens"),
    (lambda: MeasuredLengths(((16, 10, -1),)), "reasoning tokens must be >= 0"),
    (lambda: SimWorkload(lengths=((16, 10),), concurrency=1, reasoning_tokens=LengthDistribution.fixed(4)),
     "measured lengths carry their own reasoning"),
])
def test_bad_reasoning_lengths_name_the_problem(call, message):
    with pytest.raises(ValueError, match=message):
        call()
