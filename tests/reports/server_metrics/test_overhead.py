"""Client beside server, per level: the overhead, the TTFT split of the mean, and the warnings."""

import pytest

from contract.level_result import Distribution, ServerHistogram
from reports.server_metrics.overhead import client_vs_server


def _level(client_ttft_mean: float, server_ttft_mean: float):
    """A level's client metrics and server histograms: client_vs_server's two arguments."""
    return ({"ttft_s": Distribution(count=100, p50=0.05, p99=0.09, mean=client_ttft_mean)},
            {"ttft_s": ServerHistogram(count=100, p50=0.045, p50_bucket=(0.04, 0.05), p99=0.08,
                                       p99_bucket=(0.075, 0.1), mean=server_ttft_mean),
             "queue_s": ServerHistogram(count=100, mean=0.010), "prefill_s": ServerHistogram(count=100, mean=0.030)})


def test_the_mean_splits_into_overhead_front_end_queue_and_prefill():
    out = client_vs_server(*_level(0.050, 0.046))
    split = out.ttft_split_mean
    assert split.overhead_s == pytest.approx(0.004) and split.front_end_s == pytest.approx(0.006)
    assert split.overhead_s + split.front_end_s + split.queue_s + split.prefill_s == pytest.approx(0.050)
    assert out.warnings == ()


def test_a_server_mean_above_the_clients_is_named_as_a_window_mismatch():
    out = client_vs_server(*_level(0.0863, 0.0867))
    assert out.ttft_s.overhead_mean < 0
    [warning] = out.warnings
    assert "86.7 ms" in warning and "86.3 ms" in warning and "different requests" in warning


def test_a_large_client_share_is_warned_about():
    [warning] = client_vs_server(*_level(0.050, 0.030)).warnings
    assert warning.startswith("ttft_s: 40% of the client's mean")
