"""Quantized weights in the reference engine: int8 rows with a scale each, the bytes the engine reports
against `calc weights`, and outputs close to the float model's."""

from __future__ import annotations

import pytest
import torch

from engine_core.models import get_model
from calculators.weights import weights
from reference_server.engine.config import EngineConfig
from reference_server.engine.engine import Engine
from reference_server.engine.quantization import quantize_rows
from engine_core.scheduling.sampling import SamplingParams


def test_rows_are_int8_within_half_a_step_of_their_scale():
    w = torch.randn(6, 40)
    w[2] = 0.0   # an all-zero row keeps a usable scale
    q, scales = quantize_rows(w)
    assert q.dtype == torch.int8 and q.abs().max() <= 127 and scales.shape == (6,)
    assert torch.all((q.float() * scales[:, None] - w).abs() <= scales[:, None] / 2 + 1e-7)
    assert torch.isfinite(scales).all() and (q[2] == 0).all()


def _engine(**flags) -> Engine:
    return Engine(EngineConfig.from_flags(model=flags.pop("model", "tiny"), strategy="continuous", **flags))


def _greedy(engine: Engine) -> list[int]:
    engine.add_request("r", list(range(3, 40)), SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True))
    out = []
    while engine.has_unfinished_requests():
        for step in engine.step():
            out += step.new_token_ids
    return out


@pytest.mark.parametrize("method", ["int8", "int8-dynamic"])
def test_a_quantized_engine_reports_its_real_weight_bytes_and_decodes_near_the_float_model(method):
    plain, quantized = _engine(), _engine(quantization=method)
    plain_bytes, int8_bytes = plain.describe()["weight_bytes"], quantized.describe()["weight_bytes"]
    assert quantized.describe()["quantization"] == method
    assert plain_bytes == weights(get_model("tiny"), "fp32").weight_bytes   # the float model: exactly the calculator's
    assert 0.25 < int8_bytes / plain_bytes < 0.30   # a quarter, plus a scale per row of 64 (tiny's width)
    expected, got = _greedy(plain), _greedy(quantized)
    assert len(got) == 24 and got[:4] == expected[:4]   # the first tokens agree; random weights drift later


def test_on_small_the_reported_bytes_are_calc_weights_within_one_percent():
    engine = _engine(model="small", quantization="int8", kv_blocks=8)
    reported = engine.describe()["weight_bytes"]
    assert reported == pytest.approx(weights(get_model("small"), "int8").weight_bytes, rel=0.01)


@pytest.mark.parametrize("flags, says", [
    (dict(quantization="int4"), "must be one of int8, int8-dynamic"),
    (dict(quantization="int8-dynamic", dtype="bf16"), "runs in float32 on a CPU"),
    (dict(quantization="int8", emulate="h100-sxm", model="llama-3.1-8b", dtype="bf16"), "emulated GPU takes"),
])
def test_quantization_that_cannot_run_is_refused_naming_the_field(flags, says):
    with pytest.raises(ValueError, match=says):
        EngineConfig.from_flags(strategy="continuous", **{"model": "tiny", **flags})
