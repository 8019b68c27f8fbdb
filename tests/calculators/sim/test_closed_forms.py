"""The simulator against queueing theory's closed forms, percentiles included (not only means).

- M/D/1: no batching, one fixed-length request at a time, Poisson arrivals: the exact waiting-time
  distribution (calculators.queueing.md1_response_quantile).
- M/M/1: the same with single-step requests whose step time is exponential (jitter factors drawn
  from Exp(1)'s quantiles): response ~ Exp(mu - lambda).
- M/M/c: continuous batching with c slots, a step cost that does not depend on the batch, and
  geometric output lengths: each request holds a slot for an (almost) exponential time, so the
  queue is Erlang's (calculators.queueing.mmc), up to one step of granularity.
- the batch-service queue: dynamic batching with no queue delay, single-step requests
  (calculators.batch_queue, itself an approximation within ~10%, hence the wider tolerance).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from calculators.batch_queue import batch_queue
from calculators.queueing import md1, md1_response_quantile, mmc, response_quantile
from calculators.sim.simulate import SimServer, SimWorkload, simulate
from calculators.sim.step_model import StepTimeModel
from contract.distributions import LengthDistribution

QUANTILES = (0.5, 0.9, 0.99)


def test_no_batching_is_an_md1_queue_at_every_percentile():
    model = StepTimeModel(base_s=0.01, per_seq_s=0.0005, per_prefill_token_s=2e-5)
    prompt, output = 100, 20
    service = model.step_s(1, prompt) + (output - 1) * model.step_s(1)
    rate = 0.5 / service   # at 0.7 a 20k-request p99 still wanders by ~6% (long busy periods)
    result = simulate(SimServer(strategy="none"),
                      SimWorkload(prompt_tokens=LengthDistribution.fixed(prompt),
                               output_tokens=LengthDistribution.fixed(output),
                               requests=20_000, rate_rps=rate, seed=3), model)
    e2e = result.metrics["e2e_s"]
    assert e2e["mean"] == pytest.approx(md1(rate, 1 / service).mean_response_s, rel=0.04)
    for q in QUANTILES:
        assert e2e[f"p{round(q * 100)}"] == pytest.approx(md1_response_quantile(rate, service, q), rel=0.06), q


def test_exponential_single_steps_make_an_mm1_queue():
    exp_quantiles = tuple(-math.log(1 - (i + 0.5) / 4096) for i in range(4096))   # Exp(1), mean ~1
    model = StepTimeModel(base_s=0.01, jitter=exp_quantiles)
    mean_service = 0.01 * float(np.mean(exp_quantiles))
    rate = 0.6 / mean_service
    result = simulate(SimServer(strategy="none"),
                      SimWorkload(prompt_tokens=LengthDistribution.fixed(1), output_tokens=LengthDistribution.fixed(1),
                               requests=30_000, rate_rps=rate, seed=7), model)
    theory = mmc(rate, 1 / mean_service, 1)
    e2e = result.metrics["e2e_s"]
    assert e2e["mean"] == pytest.approx(theory.mean_response_s, rel=0.05)
    for q in QUANTILES:   # response ~ Exp(mu - lambda)
        assert e2e[f"p{round(q * 100)}"] == pytest.approx(-math.log(1 - q) / (1 / mean_service - rate), rel=0.06), q


def test_continuous_batching_with_flat_steps_and_geometric_outputs_is_mmc():
    step, mean_output, slots = 0.001, 50, 4
    outputs = np.random.default_rng(11).geometric(1 / mean_output, size=50_000)
    model = StepTimeModel(base_s=step)   # every step costs the same, whatever its batch
    service = step * float(outputs.mean())
    rate = 0.6 * slots / service
    server = SimServer.from_flags("continuous", max_num_seqs=slots)
    result = simulate(server, SimWorkload(prompt_tokens=LengthDistribution.fixed(1),
                                       output_tokens=LengthDistribution.from_values(outputs),
                                       requests=30_000, rate_rps=rate, seed=2), model)
    theory = mmc(rate, 1 / service, slots)
    e2e = result.metrics["e2e_s"]
    assert e2e["mean"] == pytest.approx(theory.mean_response_s, rel=0.05)
    for q in QUANTILES:
        exact = response_quantile(theory.p_wait, theory.mean_wait_s, service, 1.0, q)
        assert e2e[f"p{round(q * 100)}"] == pytest.approx(exact, rel=0.06), q
    waited = result.metrics["ttft_s"]   # first token: the next step boundary, a slot, then one step
    assert theory.p_wait < 0.5 and step <= waited["p50"] <= 2 * step   # most find a slot free


@pytest.mark.parametrize("rate", [20.0, 200.0])
def test_dynamic_batching_is_the_batch_service_queue_in_mean_and_tail(rate):
    model = StepTimeModel(base_s=0.02, per_seq_s=0.001)
    server = SimServer.from_flags("dynamic", max_batch_size=32, max_queue_delay_us=0)
    result = simulate(server, SimWorkload(prompt_tokens=LengthDistribution.fixed(1),
                                       output_tokens=LengthDistribution.fixed(1),
                                       requests=20_000, rate_rps=rate, seed=5), model)
    theory = batch_queue(rate, 0.02, 0.001, 32)
    e2e = result.metrics["e2e_s"]
    assert e2e["mean"] == pytest.approx(theory.mean_response_s, rel=0.06)
    assert e2e["p99"] == pytest.approx(theory.response_p99_s, rel=0.12)
    assert theory.batch_time_s <= e2e["p50"] <= 2 * theory.batch_time_s   # own batch, plus part of the one before
