"""The what-if's distance from its calibration, and the interval widened for it."""

from types import SimpleNamespace

import numpy as np
import pytest

from reports.predict.coverage import WIDEN_PER_DOUBLING, calibrated, describe_distance, distance, load_factor, widened, widening


def level(kind: str, prompts, outputs, tokens_per_s: float):
    return SimpleNamespace(kind=kind, lengths=np.column_stack([prompts, outputs]).astype(np.int64),
                           output_tokens_per_s=tokens_per_s)


CLOSED = [level("concurrency", [32, 80, 128], [16, 40, 64], 800.0),
          level("concurrency", [40, 90, 120], [20, 30, 60], 4000.0)]


def test_the_calibrations_own_workload_is_inside_on_every_axis():
    coverage = calibrated(CLOSED, None)
    own = np.concatenate([s.lengths for s in CLOSED])
    away = distance(coverage, own, "concurrency", 1.0)
    assert away["factor"] == 1.0
    assert away["prompt_tokens"]["share_outside"] == 0.0
    assert load_factor(coverage, 2000.0) == 1.0


def test_longer_prompts_and_an_open_loop_are_distances_with_their_figures():
    coverage = calibrated(CLOSED, None)
    asked = np.array([[240, 80], [300, 80], [120, 80], [360, 80]])
    away = distance(coverage, asked, "rate_rps", 4.0)
    prompt = away["prompt_tokens"]
    assert prompt["asked_mean"] == 255.0
    assert prompt["share_outside"] == 0.75                 # 240, 300, 360 are past the longest calibrated (128)
    mean_of_level_means = max(np.mean([32, 80, 128]), np.mean([40, 90, 120]))
    assert prompt["factor"] == pytest.approx(255.0 / mean_of_level_means)
    assert away["output_tokens"]["factor"] == pytest.approx(80 / np.mean([16, 40, 64]))
    assert away["arrivals"] == {"calibrated": "closed loop", "asked": "open loop, cv^2 4", "factor": 8.0}
    assert away["factor"] == pytest.approx(prompt["factor"] * away["output_tokens"]["factor"] * 8.0)
    line = describe_distance(away)
    assert "prompt tokens mean 255" in line and "75% of requests outside its 32-128" in line
    assert "arrivals open loop, cv^2 4, calibrated on closed loop" in line


def test_an_open_loop_calibration_is_compared_on_its_cv2():
    coverage = calibrated([level("rate_rps", [64], [32], 500.0)], 1.0)
    assert distance(coverage, np.array([[64, 32]]), "rate_rps", 1.0)["factor"] == 1.0
    assert distance(coverage, np.array([[64, 32]]), "rate_rps", 4.0)["arrivals"]["factor"] == 4.0
    assert distance(coverage, np.array([[64, 32]]), "concurrency", 1.0)["arrivals"]["factor"] == 2.0


def test_loads_past_the_calibrated_throughput_count_as_distance():
    coverage = calibrated(CLOSED, None)
    assert load_factor(coverage, 8000.0) == 2.0
    assert load_factor(coverage, 400.0) == 2.0


def test_the_interval_widens_by_the_rate_per_doubling():
    assert widening(1.0) == 0.0 and widening(0.5) == 0.0
    assert widening(8.0) == pytest.approx(3 * WIDEN_PER_DOUBLING)
    metrics = {"ttft_s": {"p50": {"value": 0.010, "interval": [0.009, 0.012]}, "p99": {"value": None, "interval": None}}}
    wide = widened(metrics, 0.3)
    assert wide["ttft_s"]["p50"] == {"value": 0.010, "interval": [pytest.approx(0.006), pytest.approx(0.015)]}
    assert wide["ttft_s"]["p99"] == {"value": None, "interval": None}
    assert widened(metrics, 0.0) is metrics
