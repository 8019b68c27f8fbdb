"""The published MoE latency points (lab/calculators/moe_latency_points.csv, GPUStack's vLLM runs) and their
check: the rows parse inside the catalogs with the engine's own flags, none is a model the roofline fit saw, a
request's lengths are the row's means, and vLLM bench's figures come out of the simulated requests as vLLM bench
computes them (TPOT without the first token)."""

from __future__ import annotations

import csv
from importlib import resources

import numpy as np
import pytest

from engine_core.gpus import get_gpu
from engine_core.models import get_model
from lab.calculators.moe_latency import METRICS, predict, read_points


def test_every_point_is_a_catalog_moe_model_on_a_catalog_gpu_with_every_figure():
    points = read_points()
    assert len(points) == 16 and len({p.id for p in points}) == 16
    for point in points:
        assert get_model(point.model).is_moe
        get_gpu(point.gpu)
        assert set(point.measured) == set(METRICS) and all(v > 0 for v in point.measured.values())
        assert point.measured["ttft_median_ms"] < point.measured["ttft_p99_ms"]
    row = next(p for p in points if p.id == "oss120-h100-tp1-4k")
    # 1,999,249 prompt and 67,205 generated tokens over 500 requests: 3,998 and 134 a request
    assert (row.prompt, row.output) == (3998, 134)
    assert row.measured["out_tok_s"] == pytest.approx(67205 / 145.04)


def test_no_point_is_a_model_the_roofline_fit_was_fitted_on():
    fitted = resources.files("calculators").joinpath("roofline_fit/published_points.csv").read_text().splitlines()
    assert not {row["model"] for row in csv.DictReader(fitted)} & {p.model for p in read_points()}


@pytest.mark.slow   # one simulated offline run of 1,000 requests, under a second
def test_a_point_is_predicted_as_vllm_bench_reports_it():
    point = next(p for p in read_points() if p.id == "oss20-h100-tp1-128")
    predicted = predict(point)
    assert set(predicted) == set(METRICS)
    assert predicted["out_tok_s"] == pytest.approx(point.requests * point.output / predicted["duration_s"])
    assert 0 < predicted["ttft_median_ms"] <= predicted["ttft_p99_ms"] < predicted["duration_s"] * 1e3
    assert all(np.isfinite(v) and v > 0 for v in predicted.values())
