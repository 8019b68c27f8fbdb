"""reports.classic.server_split: Triton counters read as window deltas, beside the client."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from contract.server_metrics import SCRAPE_MARKER
from reports.classic.predictions import compare, sentences
from reports.classic.server_split import level_split

LABELS = 'model="m",version="1"'


def scrapes(values_at: dict[float, dict[str, float]]) -> pd.DataFrame:
    """server_metrics.csv rows: each scrape's marker and its counters (written only when changed)."""
    rows, last = [], {}
    for t, values in sorted(values_at.items()):
        rows.append((t, SCRAPE_MARKER, "", 1.0))
        for name, value in values.items():
            if last.get(name) != value:
                rows.append((t, name, LABELS, value))
                last[name] = value
    return pd.DataFrame(rows, columns=["t", "name", "labels", "value"])


def counters(success, queue_us, infer_us, request_us, rows, batches):
    return {"nv_inference_request_success": success, "nv_inference_queue_duration_us": queue_us,
            "nv_inference_compute_input_duration_us": 0.0, "nv_inference_compute_infer_duration_us": infer_us,
            "nv_inference_compute_output_duration_us": 0.0, "nv_inference_request_duration_us": request_us,
            "nv_inference_count": rows, "nv_inference_exec_count": batches}


def test_the_split_is_the_window_delta_per_request_and_the_client_over_the_same_requests():
    metrics = scrapes({0.0: counters(10, 1e4, 5e3, 2e4, 10, 5), 1.0: counters(20, 3e4, 1e4, 5e4, 30, 10),
                       2.0: counters(20, 3e4, 1e4, 5e4, 30, 10),   # unchanged: no rows but the marker
                       3.0: counters(40, 7e4, 2e4, 1.1e5, 70, 20)})
    t_end = np.array([0.5, 1.5, 2.5, 3.5])
    e2e = np.array([9.0, 0.004, 0.006, 9.0])
    split = level_split(metrics, "m", (1.2, 2.8), t_end, e2e)
    # bracketed by the scrapes at 1.0 and 3.0: 20 requests, 4e4 us queued, 1e4 us computing, 6e4 us in all
    assert split["server_requests"] == 20 and split["queue_s"] == pytest.approx(2e-3)
    assert split["compute_s"] == pytest.approx(0.5e-3) and split["server_request_s"] == pytest.approx(3e-3)
    assert split["batch_rows"] == pytest.approx(4.0) and split["client_requests"] == 2
    assert split["client_e2e_s"] == pytest.approx(0.005) and split["transport_s"] == pytest.approx(0.002)
    assert split["in_server_other_s"] == pytest.approx(0.5e-3)


def test_no_triton_counters_no_split():
    metrics = pd.DataFrame([(0.0, SCRAPE_MARKER, "", 1.0), (1.0, SCRAPE_MARKER, "", 1.0)],
                           columns=["t", "name", "labels", "value"])
    assert level_split(metrics, "m", (0.2, 0.8), np.array([0.5]), np.array([0.01])) is None
    assert level_split(None, "m", (0.2, 0.8), np.array([0.5]), np.array([0.01])) is None


def test_predictions_compared_row_by_row():
    base = np.array([[0.6, 0.4], [0.3, 0.7]], dtype=np.float32)
    same = compare({"off": base, "on": base.copy()})
    assert same[0]["identical"] and sentences(same) == ["on against off: identical predictions on all 2 seeded rows."]
    moved = compare({"off": base, "on": base + np.array([[0.0, 0.0], [0.3, -0.3]], dtype=np.float32)})
    assert moved[0]["labels_equal"] == 1 and moved[0]["max_abs_diff"] == pytest.approx(0.3)
    assert "the same label on 1 of 2 seeded rows" in sentences(moved)[0]
    assert compare({"off": base}) == []
