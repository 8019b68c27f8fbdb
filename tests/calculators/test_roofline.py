"""Roofline step times (terms, TP all-reduces, efficiencies and bands), calibration fits and cost arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from calculators.sim.calibrate import calibrate_roofline, fit_step_model, fit_step_time
from calculators.cost import cost, slo_operating_point, usd_per_million_requests, usd_per_million_tokens
from calculators.efficiency import IDEAL, Efficiencies
from calculators.efficiency_profile import default_profile
from engine_core.gpus import get_gpu
from engine_core.models import get_model
from calculators.roofline import roofline
from calculators.sim.step_model import StepTimeModel, step_model_from_roofline
from calculators.weights import weights

LLAMA, H100 = get_model("llama-3.1-8b"), get_gpu("h100-sxm")


def test_batch_one_decode_reads_the_weights_once_and_is_memory_bound():
    result = roofline(LLAMA, H100, batch=1, context=0, efficiency=IDEAL)
    w = weights(LLAMA, "bf16")
    read = w.weight_bytes - (w.embedding_bytes - w.lm_head_bytes)   # the input table is only gathered
    assert result.weight_bytes_read == read
    assert result.decode_step_s == pytest.approx(read / 3.35e12)
    assert result.bound == "memory" and result.decode_tokens_per_s == pytest.approx(1 / result.decode_step_s)
    fitted = roofline(LLAMA, H100, batch=1, context=0)   # the fitted profile: slower, with its fixed costs
    eff = default_profile().resolve(H100, "bf16", 1)
    assert fitted.decode_step_s == pytest.approx(read / (3.35e12 * eff.weight_bandwidth) + eff.decode_overhead_s
                                                 + eff.per_sequence_s)


def test_kv_reads_grow_with_batch_and_context():
    short = roofline(LLAMA, H100, batch=8, context=1000)
    long = roofline(LLAMA, H100, batch=8, context=2000)
    assert short.kv_bytes_read == 8 * 1000 * 131_072     # attention reads the tokens, not whole blocks
    assert long.kv_bytes_read > short.kv_bytes_read and long.decode_step_s > short.decode_step_s


def test_large_batches_turn_compute_bound_near_the_ridge_point():
    assert roofline(LLAMA, H100, batch=4096, context=0).bound == "compute"
    small = roofline(LLAMA, H100, batch=16, context=0)
    assert small.bound == "memory" and small.arithmetic_intensity < small.ridge_point
    prefill = roofline(LLAMA, H100, prompt_tokens=4096, compute_efficiency=0.5, overhead_s=0.0)
    assert prefill.prefill_bound == "compute"
    # linear layers for every prompt token, the output layer (0.525e9) for the last one only, causal attention
    linear = 8.03e9 - 2 * 0.525e9
    assert prefill.prefill_s == pytest.approx(
        (2 * linear * 4096 + 2 * 0.525e9 + 2 * 32 * 32 * 128 * 4096 ** 2) / (989e12 * 0.5), rel=0.01)


def test_moe_decode_touches_more_experts_as_the_batch_grows():
    mixtral = get_model("mixtral-8x7b")
    one = roofline(mixtral, H100, batch=1, context=0)
    many = roofline(mixtral, H100, batch=256, context=0)
    w = weights(mixtral, "bf16")
    assert one.weight_bytes_read < 0.35 * w.weight_bytes          # top-2 of 8 experts
    assert many.weight_bytes_read == pytest.approx(w.weight_bytes - 32000 * 4096 * 2, rel=1e-3)


def test_tensor_parallel_divides_the_bytes_and_adds_all_reduces():
    one = roofline(get_model("llama-3.1-70b"), H100, batch=1, context=1000, efficiency=IDEAL)
    four = roofline(get_model("llama-3.1-70b"), H100, batch=1, context=1000, tp=4, efficiency=IDEAL)
    assert four.memory_time_s == pytest.approx(one.memory_time_s / 4, rel=0.01)
    assert one.tp_comm_s == 0 and four.tp_comm_s > 0
    assert four.decode_step_s == pytest.approx(four.memory_time_s + four.tp_comm_s)


@pytest.mark.parametrize("kwargs, message", [
    ({"batch": 0}, "batch must be a positive integer"),
    ({"context": -1}, "context must be a non-negative integer"),
    ({"bandwidth_efficiency": 1.5}, "bandwidth_efficiency must be in \\(0, 1\\]"),
    ({"compute_efficiency": 0}, "compute_efficiency must be in \\(0, 1\\]"),
])
def test_roofline_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        roofline(LLAMA, H100, **kwargs)


def test_fit_step_time_recovers_the_line():
    rng = np.random.default_rng(0)
    batch = np.repeat([1, 2, 4, 8, 16, 32], 20)
    step = 0.004 + 0.0007 * batch + rng.normal(0, 2e-5, batch.size)
    fit = fit_step_time(batch, step)
    assert fit.base_s == pytest.approx(0.004, rel=0.01) and fit.per_seq_s == pytest.approx(0.0007, rel=0.01)
    assert fit.r_squared > 0.999 and fit.samples == 120
    assert fit.predict(10) == pytest.approx(0.011, rel=0.01)


def test_fit_step_model_recovers_prefill_cost():
    rng = np.random.default_rng(1)
    batch = rng.integers(1, 33, 400)
    prefill = np.where(rng.random(400) < 0.2, rng.integers(16, 512, 400), 0)
    step = 0.002 + 0.0003 * batch + 2e-5 * prefill
    model = fit_step_model(batch, step, prefill_tokens=prefill)
    assert model.base_s == pytest.approx(0.002, rel=1e-6)
    assert model.per_seq_s == pytest.approx(0.0003, rel=1e-6)
    assert model.per_prefill_token_s == pytest.approx(2e-5, rel=1e-6)


def test_calibrate_roofline_recovers_efficiencies_and_overhead():
    batches = [1, 4, 16, 64, 1024, 2048, 4096]
    contexts = [512, 512, 512, 512, 0, 0, 0]
    truth = Efficiencies(weight_bandwidth=0.7, kv_bandwidth=0.7, prefill_compute=0.6, decode_compute=0.6,
                         decode_overhead_s=0.0005)
    measured = [roofline(LLAMA, H100, batch=b, context=s, efficiency=truth).decode_step_s
                for b, s in zip(batches, contexts)]
    result = calibrate_roofline(LLAMA, H100, batches, contexts, measured)
    assert result.bandwidth_efficiency == pytest.approx(0.7, rel=1e-3)
    assert result.compute_efficiency == pytest.approx(0.6, rel=1e-3)
    assert result.overhead_s == pytest.approx(0.0005, rel=1e-2)
    assert result.rms_relative_error < 1e-6


@pytest.mark.parametrize("call, message", [
    (lambda: fit_step_time([1, 2], [0.1]), "equal lengths"),
    (lambda: fit_step_time([4, 4, 4], [0.1, 0.2, 0.3]), "two distinct values"),
    (lambda: fit_step_time([1, 2, 3], [0.1, -0.2, 0.3]), "step_seconds must be a flat sequence"),
    (lambda: StepTimeModel(base_s=-1.0), "base_s must be >= 0"),
])
def test_calibration_rejects_bad_measurements(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_step_model_from_roofline_matches_the_roofline_at_batch_one():
    model = step_model_from_roofline(LLAMA, H100)
    assert model.step_s(1) == pytest.approx(roofline(LLAMA, H100, batch=1, context=0).decode_step_s)
    eff = default_profile().resolve(H100, "bf16", 1)
    assert model.per_context_token_s == pytest.approx(131_072 / (3.35e12 * eff.kv_bandwidth))
    assert model.per_seq_s == eff.per_sequence_s > 0
    # 64 sequences of 1000 tokens: the linear model and the roofline agree while memory bound
    assert model.step_s(64, context_tokens=64_000) == pytest.approx(
        roofline(LLAMA, H100, batch=64, context=1000).decode_step_s, rel=0.01)


def test_cost_arithmetic():
    assert usd_per_million_tokens(2.0, 1, 1000) == pytest.approx(0.5555556, rel=1e-6)       # 1e6*2/(3600*1000)
    assert usd_per_million_tokens(2.99, 8, 10_000) == pytest.approx(1e6 * 2.99 * 8 / 3.6e7)
    assert usd_per_million_requests(3.6, 1, 1.0) == pytest.approx(1000.0)
    result = cost(2.0, 2, 4000, slo_tokens_per_s=1000, requests_per_s=4)
    assert result.usd_per_hour == 4.0
    assert result.usd_per_million_tokens_at_slo == pytest.approx(4 * result.usd_per_million_tokens)
    assert result.usd_per_million_requests == pytest.approx(1e6 * 4 / (3600 * 4))
    for call, field in ((lambda: usd_per_million_tokens(2, 1, 0), "tokens_per_s"),
                        (lambda: usd_per_million_tokens(-1, 1, 10), "hourly_usd"),
                        (lambda: usd_per_million_tokens(2, 0, 10), "gpus")):
        with pytest.raises(ValueError, match=field):
            call()


def test_slo_operating_point_interpolates_to_the_slo_crossing():
    point = slo_operating_point([1, 2, 4, 8], [10, 20, 38, 50], [0.1, 0.15, 0.3, 0.9], slo_p99_s=0.5)
    assert point.interpolated and point.p99_s == 0.5
    assert point.load == pytest.approx(4 + 4 * (0.2 / 0.6)) and point.throughput == pytest.approx(38 + 12 / 3)
    assert slo_operating_point([1, 2], [10, 20], [0.1, 0.2], 0.5).load == 2
    assert slo_operating_point([1, 2], [10, 20], [0.9, 1.0], 0.5) is None


def test_fit_step_model_keeps_the_measured_spread_as_jitter():
    rng = np.random.default_rng(2)
    batch = rng.integers(1, 17, 2000)
    noise = rng.lognormal(0.0, 0.3, 2000)
    step = (0.002 + 0.0003 * batch) * noise
    model = fit_step_model(batch, step, jitter_points=101)
    assert len(model.jitter) == 101 and model.jitter == tuple(sorted(model.jitter))
    assert np.median(model.jitter) == pytest.approx(np.median(noise) / np.mean(noise), rel=0.05)
    assert fit_step_model(batch, step).jitter == ()
    with pytest.raises(ValueError, match="jitter factors must be positive"):
        StepTimeModel(base_s=0.001, jitter=(1.0, -0.5))
