"""The what-if predictor servecap predict calls: consistent with the roofline, every value with its band."""

from __future__ import annotations

import pytest

from calculators.efficiency import Efficiencies
from engine_core.gpus import get_gpu
from engine_core.models import get_model
from calculators.roofline import roofline
from calculators.whatif import steady_state_tpot, what_if

LLAMA_70B, H200 = get_model("llama-3.1-70b"), get_gpu("h200")


def test_what_if_agrees_with_the_roofline_and_carries_bands():
    w = what_if(LLAMA_70B, H200, dtype="fp8", tp=2, prompt_tokens=1000, output_tokens=250, concurrency=32)
    roof = roofline(LLAMA_70B, H200, dtype="fp8", tp=2, batch=32, context=1125, prompt_tokens=1000)
    assert w.decode_step_s.value == pytest.approx(roof.decode_step_s)
    assert w.ttft_idle_s.value == pytest.approx(roof.prefill_s)
    assert w.tpot_s.value == pytest.approx(steady_state_tpot(roof.decode_step_s, roof.prefill_s, 32, 250))
    assert w.request_latency_s.value == pytest.approx(roof.prefill_s + 249 * w.tpot_s.value)
    assert w.output_tokens_per_s.value == pytest.approx(32 / w.tpot_s.value)
    assert w.requests_per_s.value == pytest.approx(w.output_tokens_per_s.value / 250)
    for banded in (w.ttft_idle_s, w.decode_step_s, w.tpot_s, w.request_latency_s, w.output_tokens_per_s):
        assert banded.low < banded.value < banded.high and "published points on" in banded.band
    assert "hopper fp8, prompts of 1k+ tokens" in w.ttft_idle_s.band
    assert "tensor parallel" in w.decode_step_s.band   # at TP 2 the decode band is the tensor-parallel one
    one_gpu = what_if(LLAMA_70B, H200, dtype="fp8", prompt_tokens=1000, output_tokens=250, concurrency=32)
    assert "hopper fp8, one GPU" in one_gpu.decode_step_s.band
    # the TPOT band lies between the decode and prefill bands it mixes
    widths = [b.high / b.value for b in (w.decode_step_s, w.tpot_s, w.ttft_idle_s)]
    assert min(widths[0], widths[2]) <= widths[1] <= max(widths[0], widths[2])


def test_the_steady_state_tpot_charges_the_other_requests_prefills():
    assert steady_state_tpot(0.02, 0.5, 1, 100) == 0.02
    assert steady_state_tpot(0.02, 0.5, 11, 100) == pytest.approx(0.02 + 10 * 0.5 / 100)


def test_given_efficiencies_have_no_published_band_and_bad_input_is_named():
    mine = Efficiencies(0.8, 0.8, 0.6, 0.6)
    w = what_if(LLAMA_70B, H200, dtype="fp8", tp=2, prompt_tokens=100, output_tokens=10, efficiency=mine)
    assert w.tpot_s.band == "no published-point band" and w.tpot_s.low == w.tpot_s.value
    with pytest.raises(ValueError, match="concurrency must be a positive integer"):
        what_if(LLAMA_70B, H200, prompt_tokens=100, output_tokens=10, concurrency=0)
