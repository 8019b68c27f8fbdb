"""The published MoE throughput points (lab/calculators/moe_published_points.csv) and how their check sizes the
benchmark's engine: the rows parse inside the catalogs, none is a model the roofline fit saw, and trtllm-bench's
own batching limits come out of its rule."""

from __future__ import annotations

import csv
from importlib import resources

import pytest

from calculators.moe_layout import MoeLayout
from engine_core.gpus import get_gpu
from engine_core.models import get_model
from lab.calculators.moe_published import bench_limits, predict, read_points


def test_every_point_names_a_catalog_model_gpu_and_layout_that_runs():
    points = read_points()
    assert len(points) == 55 and len({p.id for p in points}) == 55
    for point in points:
        arch = get_model(point.model)
        get_gpu(point.gpu)
        assert arch.is_moe and point.measured > 0
        MoeLayout(point.dp, point.expert_parallel).check(arch, point.tp)
        dep = f"DEP{point.dp}" if point.expert_parallel else f"TP{point.tp}"
        assert point.column.split()[1] == dep   # the table's column says the layout the row carries


def test_no_point_is_a_model_the_roofline_fit_was_fitted_on():
    fitted = resources.files("calculators").joinpath("roofline_fit/published_points.csv").read_text().splitlines()
    models = {row["model"] for row in csv.DictReader(fitted)}
    assert not models & {p.model for p in read_points()}


def test_trtllm_bench_sizes_its_batch_from_the_kv_memory_and_rounds_up():
    point = next(p for p in read_points() if p.id == "oss20-h200-1k1k")
    # 2 x 24 layers x 8 KV heads x 64 x 2 bytes = 49,152 B a token; 140.4 GiB less 20.9B params x 4.25 bits
    # leaves 130.05 GiB; x 0.90 over 2,000 tokens a request: 1,278.5 requests, rounded up to 256s: 1,280;
    # tokens 1,278.5 x 2 = 2,557, rounded up to 256s: 2,560
    assert bench_limits(point) == (1280, 2560)
    long = next(p for p in read_points() if p.id == "q235-h200-32768-1024")
    assert bench_limits(long) == (64, 2048)   # the floors: at least 64 sequences and 2,048 tokens


@pytest.mark.slow   # one simulated offline run, about a second
def test_a_point_is_predicted_per_gpu_over_the_whole_run():
    point = next(p for p in read_points() if p.id == "oss20-h100-1k1k")
    per_gpu, batch, tpot = predict(point, "tensorrt-llm")
    assert 0.5 * point.measured < per_gpu < 1.5 * point.measured and batch > 100 and 0 < tpot < 1
