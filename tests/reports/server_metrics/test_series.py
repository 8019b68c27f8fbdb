"""server_metrics.csv rebuilt from changed-only rows; the means and latencies of a level's window."""

import math

import pandas as pd
import pytest

import numpy as np

from reports.server_metrics.latency import observation_start, server_latency
from reports.server_metrics.means import server_means
from reports.server_metrics.series import ServerSeries
from reports.summary import observed_windows
from contract.server_metrics import SCRAPE_MARKER


def _frame(rows):
    return pd.DataFrame(rows, columns=["t", "name", "labels", "value"])


def _vllm_run():
    """Scrapes at t = 0..10; a gauge that changes twice, a counter, a TTFT histogram with 10 requests
    before the window (t <= 2) and 10 inside it (2 < t <= 8), and two engines' label sets."""
    rows = [(t, SCRAPE_MARKER, "", 50) for t in range(11)]
    for engine in ("0", "1"):
        lab = f'engine="{engine}",model_name="tiny"'
        rows += [(0, "vllm:num_requests_running", lab, 0), (3, "vllm:num_requests_running", lab, 4),
                 (7, "vllm:num_requests_running", lab, 2),
                 (0, "vllm:kv_cache_usage_perc", lab, 0.5 if engine == "0" else 0.1),
                 (0, "vllm:num_preemptions_total", lab, 1), (5, "vllm:num_preemptions_total", lab, 3)]
    lab = 'engine="0",model_name="tiny"'
    for t, (c01, c02, c04, cinf, total) in ((1, (5, 10, 10, 10, 0.1)), (6, (6, 15, 19, 20, 0.5))):
        for le, count in (("0.01", c01), ("0.02", c02), ("0.04", c04), ("+Inf", cinf)):
            rows.append((t, "vllm:time_to_first_token_seconds_bucket", f'{lab},le="{le}"', count))
        rows += [(t, "vllm:time_to_first_token_seconds_sum", lab, total),
                 (t, "vllm:time_to_first_token_seconds_count", lab, cinf)]
    rows.append((0, "python_gc_objects_collected_total", "", 5))   # a family the mapping does not read
    return _frame(rows)


def test_series_carry_the_last_change_forward_and_detect_the_engine():
    series = ServerSeries.from_frame(_vllm_run())
    assert series.engine == "vllm" and list(series.scrape_times) == list(range(11))
    assert "python_gc_objects_collected_total" not in series.samples
    means = server_means(series, [(2.0, 8.0)])   # scrapes 2..8: running (both engines) 0,8,8,8,8,4,4
    assert means["requests_running_mean"] == pytest.approx(40 / 7) and means["requests_running_max"] == 8
    assert means["kv_usage_mean"] == pytest.approx(0.3)   # a fraction: averaged over the two engines
    assert means["preemptions"] == 4 and means["scrapes"] == 7 and means["engine"] == "vllm"


def test_latency_percentiles_come_from_the_bucket_deltas_of_the_window():
    latency = server_latency(_vllm_run(), [(2.0, 8.0)])
    ttft = latency["ttft_s"]
    # the window's own 10 requests: 1 <= 0.01, 4 in (0.01, 0.02], 4 in (0.02, 0.04], 1 above
    assert ttft.count == 10 and ttft.mean == pytest.approx(0.04)
    assert ttft.p50 == pytest.approx(0.01 + 0.01 * (5 - 1) / 4) and ttft.p50_bucket == (0.01, 0.02)
    assert ttft.p99 == 0.04 and ttft.p99_bucket[1] == math.inf
    assert ttft.source == "vllm:time_to_first_token_seconds" and set(latency) == {"ttft_s"}
    assert server_latency(_vllm_run(), [(7.0, 10.0)]) == {}   # nothing finished in that window


def test_files_without_scrape_markers_read_each_row_time_as_a_scrape():
    rows = [(t, "servecap_requests_running", "", float(t)) for t in (1, 2, 3)]
    means = server_means(ServerSeries.from_frame(_frame(rows)), [(1.5, 3.0)])
    assert means["engine"] == "servecap" and means["requests_running_mean"] == 2.5 and means["scrapes"] == 2
    assert server_means(ServerSeries.from_frame(None), [(0, 1)]) == {}


def test_the_servers_view_opens_after_the_warm_up_requests_and_counts_only_inside_the_window():
    assert observation_start(2.0, np.array([1.0, 3.5, 2.5])) == 3.5 and observation_start(2.0, np.empty(0)) == 2.0
    # scrapes at 0..10, buckets change at t=1 and t=6: a window from 1.5 opens at the scrape at t=2,
    # so the observations counted at t=1 stay outside it
    assert server_latency(_vllm_run(), [(1.5, 8.0)])["ttft_s"].count == 10
    assert server_latency(_vllm_run(), [(0.0, 8.0)])["ttft_s"].count == 20


def test_a_level_measured_in_rounds_counts_its_own_spans_and_not_the_time_between():
    series = ServerSeries.from_frame(_vllm_run())
    spans = [(0.0, 2.0), (6.0, 8.0)]   # the preemptions (t=5) fall between them, the second TTFT batch (t=6) opens span 2
    means = server_means(series, spans)
    assert means["scrapes"] == 6 and means["requests_running_mean"] == pytest.approx(16 / 6)
    assert means["preemptions"] == 0
    assert server_latency(series, spans)["ttft_s"].count == 10          # the 10 observed at t=1, inside span 1
    assert server_means(series, [(0.0, 8.0)])["preemptions"] == 4          # one span over the gap counts them


def test_each_round_opens_after_its_own_warm_up_not_the_next_rounds():
    # a sweep's rounds interleave levels: this level's windows at [10, 15] and [40, 45], each after a
    # warm-up of its own (sent at 9-10, the last ending at 10.4; sent at 39-40, ending by 40.3). The
    # second round's warm-up ends before the second window, yet it is not the first round's.
    windows = [(10.0, 15.0), (40.0, 45.0)]
    warmups = np.array([[9.0, 9.6], [9.8, 10.4], [39.0, 39.5], [39.9, 40.3], [39.95, np.nan]])
    assert observed_windows(windows, warmups) == [(10.4, 15.0), (40.3, 45.0)]
    assert observed_windows([(10.0, 15.0)], np.empty((0, 2))) == [(10.0, 15.0)]
