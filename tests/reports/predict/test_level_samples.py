"""A level's steps brought to the run's usual machine speed, per level or per window (round)."""

from __future__ import annotations

import numpy as np
import pytest

from reports.predict.evidence import LevelSample, StepRows, at_usual_speed


def _sample(window_speeds: tuple[float, ...]) -> LevelSample:
    steps = StepRows(np.ones(4), np.zeros(4), np.full(4, 100.0), np.array([0.002, 0.002, 0.004, 0.004]),
                     window=np.array([0, 0, 1, 1]))
    return LevelSample(level="continuous/c=4", strategy="continuous", kind="concurrency", load=4.0, warmup_s=1.0,
                       duration_s=10.0, lengths=((32, 16),), measured={}, output_tokens_per_s=100.0, steps=steps,
                       window_speeds=window_speeds, machine_speed=1.5)


def test_each_step_is_divided_by_its_own_windows_speed_or_by_the_levels():
    sample = _sample((1.0, 2.0))
    assert at_usual_speed(sample, by_window=True).steps.duration_s == pytest.approx([0.002] * 4)
    assert at_usual_speed(sample).steps.duration_s == pytest.approx(np.array([0.002, 0.002, 0.004, 0.004]) / 1.5)
    # a window the canary did not cover: the level's speed for all of them
    assert at_usual_speed(_sample(()), by_window=True).steps.duration_s == pytest.approx(
        np.array([0.002, 0.002, 0.004, 0.004]) / 1.5)
