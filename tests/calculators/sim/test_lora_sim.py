"""LoRA in the simulator: the engine's slots decide who waits, a step costs what its adapters add, and the
costs fit back from steps."""

from __future__ import annotations

import numpy as np
import pytest

from calculators.sim.lora_step import LoraServing, fit_lora_step
from calculators.sim.simulate import SimServer, SimWorkload, simulate, simulate_trace
from calculators.sim.step_model import StepTimeModel
from contract.distributions import LengthDistribution
from contract.model_mix import parse_model_mix
from engine_core.scheduling.batch_shape import BatchShape

MODEL = StepTimeModel(base_s=0.01, per_seq_s=0.001, per_prefill_token_s=1e-5)


def _workload(mix: str | None, **kw) -> SimWorkload:
    return SimWorkload(prompt_tokens=LengthDistribution.fixed(32), output_tokens=LengthDistribution.fixed(16),
                    requests=600, concurrency=16, model_mix=None if mix is None else parse_model_mix(mix), **kw)


def test_a_step_costs_its_adapters_their_tokens_and_its_cold_loads():
    serving = LoraServing(8, per_adapter_s=0.002, per_lora_token_s=1e-5, load_s=0.003)
    shape = BatchShape(sequences=10, prefill_tokens=0, decode_seqs=10, context_tokens=500, lora_adapters=3,
                       lora_tokens=9)
    assert serving.extra_s(shape, loaded=2) == pytest.approx(3 * 0.002 + 9 * 1e-5 + 2 * 0.003)
    with pytest.raises(ValueError, match="load_s must be >= 0"):
        LoraServing(8, load_s=-1.0)
    with pytest.raises(ValueError, match="continuous strategy"):
        SimServer(strategy="static", lora=serving)


def test_free_adapters_on_every_slot_change_nothing_and_a_base_mix_is_the_plain_run():
    plain = simulate(SimServer(strategy="continuous"), _workload(None), MODEL)
    free = simulate(SimServer(strategy="continuous", lora=LoraServing(64)), _workload("zipf:64"), MODEL)
    assert free.metrics == plain.metrics
    base = simulate(SimServer(strategy="continuous", lora=LoraServing(1, per_adapter_s=0.01)),
                    _workload("base:1"), MODEL)
    assert base.metrics == plain.metrics


def test_fewer_slots_make_requests_wait_and_the_tail_grows():
    costs = dict(per_adapter_s=0.002, per_lora_token_s=1e-5, load_s=0.003)
    wide = simulate(SimServer(strategy="continuous", lora=LoraServing(64, **costs)), _workload("zipf:64"), MODEL)
    narrow = simulate(SimServer(strategy="continuous", lora=LoraServing(4, **costs)), _workload("zipf:64"), MODEL)
    assert narrow.metrics["ttft_s"]["p99"] > 2 * wide.metrics["ttft_s"]["p99"]
    assert narrow.output_tokens_per_s < wide.output_tokens_per_s
    trace = simulate_trace(SimServer(strategy="continuous", lora=LoraServing(4, **costs)), _workload("zipf:64"),
                           MODEL)
    assert trace.lora[:5] == simulate_trace(SimServer(strategy="continuous"), _workload("zipf:64"), MODEL).lora[:5]
    assert {name for name in trace.lora} <= {f"lora-{k}" for k in range(1, 65)}


def test_the_costs_fit_back_from_steps():
    rng = np.random.default_rng(0)
    n = 400
    batch = rng.integers(1, 33, n).astype(float)
    adapters = np.minimum(rng.integers(0, 9, n), batch)
    tokens = np.where(adapters > 0, batch, 0)
    context = batch * rng.integers(50, 300, n)
    loads = np.minimum(rng.integers(0, 3, n), adapters)
    load_s = loads * 0.004
    step = 0.01 + 0.001 * batch + 2e-6 * context + 0.0015 * adapters + 2e-5 * tokens + load_s
    fit = fit_lora_step(8, batch, np.zeros(n), context, step * rng.normal(1, 0.01, n), adapters, tokens, loads, load_s)
    assert fit.serving.per_adapter_s == pytest.approx(0.0015, rel=0.1)
    assert fit.serving.per_lora_token_s == pytest.approx(2e-5, rel=0.2)
    assert fit.serving.load_s == pytest.approx(0.004) and fit.serving.max_loras == 8
    assert fit.lora_s == pytest.approx(fit.serving.per_adapter_s * adapters + fit.serving.per_lora_token_s * tokens
                                       + load_s)
