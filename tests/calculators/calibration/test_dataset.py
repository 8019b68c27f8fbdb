"""The published-points dataset: it parses, every point has a source and a stated setup, units convert."""

from __future__ import annotations

import pytest

from calculators.roofline_fit.dataset import METRICS, _point, load_points, load_sources
from engine_core.gpus import get_gpu
from engine_core.models import get_model

POINTS = load_points()


def test_every_point_parses_names_a_catalog_model_and_gpu_and_a_source_with_an_address():
    sources = load_sources()
    assert len(POINTS) >= 150
    for p in POINTS:
        get_model(p.model), get_gpu(p.gpu)
        source = sources[p.source]
        assert (source.repository and source.path and source.ref) or source.url, p.source
        assert source.title and source.engine
        assert p.metric in METRICS and p.measured_s > 0
        assert p.complete or p.setup.startswith("partial: ") and len(p.setup) > len("partial: ") + 10


def test_the_dataset_spans_the_gpus_dtypes_and_tp_degrees_users_ask_about():
    complete = [p for p in POINTS if p.complete]
    assert {"a100-80gb", "h100-sxm", "h200"} <= {p.gpu for p in complete}
    assert {"bf16", "fp16", "fp8"} <= {p.dtype for p in complete}
    assert {1, 2, 4, 8} <= {p.tp for p in complete}
    assert {"llama-2-7b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b"} <= {p.model for p in complete}
    assert len({p.source for p in complete}) >= 5
    assert any(not p.complete for p in POINTS)   # unstated setups are kept, and marked


def test_published_numbers_convert_to_seconds_as_the_module_docstring_says():
    by_id = {p.id: p for p in POINTS}
    trt = by_id["trtllm-perf-v0.9-17"]       # H100 fp8 Llama-2-7B, batch 896, 128 in / 128 out, 19,854 out tok/s/GPU
    assert (trt.batch, trt.input_tokens, trt.output_tokens, trt.value) == (896, 128, 128, 19854)
    assert trt.measured_s == pytest.approx(896 * 128 / 19854)
    tp2 = by_id["trtllm-perf-v0.9-21"]       # per GPU at TP2: the run took half as long per GPU's tokens
    assert tp2.measured_s == pytest.approx(tp2.batch * tp2.output_tokens / (tp2.value * 2))
    gpt_fast = by_id["gpt-fast-readme-01"]   # 104.9 tok/s at batch 1
    assert gpt_fast.measured_s == pytest.approx(1 / 104.9) and gpt_fast.mean_context == 5 + 100
    ttft = by_id["trtllm-perf-v0.9-58"]
    assert ttft.metric == "ttft" and ttft.measured_s == pytest.approx(0.0308)


@pytest.mark.parametrize("change, message", [
    ({"metric": "tokens"}, "metric 'tokens'"),
    ({"value": "-3"}, "must be positive"),
    ({"setup": "unknown"}, "setup must be 'complete' or 'partial"),
    ({"tp": "two"}, "invalid literal"),
])
def test_a_malformed_row_names_its_line(change, message):
    row = {"id": "x", "source": "gpt-fast-readme", "engine": "gpt-fast", "engine_version": "1", "model": "llama-2-7b",
           "gpu": "a100-80gb", "dtype": "bf16", "kv_dtype": "bf16", "tp": "1", "metric": "decode_step", "batch": "1",
           "input_tokens": "5", "output_tokens": "200", "value": "100", "unit": "tok/s/user", "setup": "complete",
           "note": ""}
    assert _point(row, 7).measured_s == pytest.approx(0.01)
    with pytest.raises(ValueError, match=f"line 9: .*{message}"):
        _point({**row, **change}, 9)
