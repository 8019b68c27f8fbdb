"""Latency per model and the cost of cold adapters, from records joined with the engine's request record."""

from __future__ import annotations

import pandas as pd
import pytest

from reports.by_model import by_model, slot_waits


def _frames():
    ok = pd.DataFrame({"response_id": ["1", "2", "3", "4", "5"], "model": ["a", "a", "b", "b", "tiny"],
                       "ttft_s": [0.1, 0.2, 0.9, 1.1, 0.1], "tpot_s": [0.01] * 5, "e2e_s": [1.0] * 5})
    engine = pd.DataFrame({"response_id": ["1", "2", "3", "4", "5", "9"],
                           "lora_wait_s": [0.0, 0.0, 0.8, 1.0, 0.0, 5.0]})
    return ok, engine


def test_per_model_latency_and_slot_waits():
    ok, engine = _frames()
    models = by_model(ok, engine)
    assert list(models) == ["a", "b", "tiny"] and models["b"].requests == 2   # busiest first, ties by name
    assert models["b"].ttft_s.p50 == pytest.approx(1.0)
    wait = models["b"].slot_wait
    assert (wait.waited_share, wait.mean_s, wait.p99_s) == (1.0, pytest.approx(0.9), pytest.approx(0.998))
    assert models["a"].slot_wait.waited_share == 0.0
    waits = slot_waits(ok, engine)
    assert waits.requests == 5 and waits.waited_share == pytest.approx(0.4)
    assert waits.wait_p50_s == pytest.approx(0.9) and waits.wait_mean_s == pytest.approx(0.36)
    assert waits.ttft_p50_waited_s == pytest.approx(1.0) and waits.ttft_p50_not_waited_s == pytest.approx(0.1)


def test_nothing_without_models_and_no_waits_without_the_engine_record():
    ok, engine = _frames()
    assert by_model(ok.assign(model=None), engine) is None and slot_waits(ok.assign(model=None), engine) is None
    assert by_model(ok, None)["a"].slot_wait is None and slot_waits(ok, None) is None
