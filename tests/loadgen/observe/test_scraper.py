"""Prometheus scraper (real HTTP endpoint from prometheus_client) and the `servecap sample` command."""

import socket
import subprocess
import sys

import pandas as pd
import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from loadgen.observe.scraper import METRIC_COLUMNS, Scraper, parse_metrics, start_scraper
from loadgen_helpers import REPO, _env, scripted_server
from waiting import wait_until


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_parse_metrics_rows_with_sorted_labels():
    text = ('# TYPE servecap_requests_running gauge\nservecap_requests_running 3\n'
            '# TYPE x_seconds histogram\nx_seconds_bucket{le="0.1",b="2",a="1"} 4\nx_seconds_bucket{le="+Inf",b="2",a="1"} 5\n'
            'x_seconds_sum{b="2",a="1"} 0.7\nx_seconds_count{b="2",a="1"} 5\n')
    rows = parse_metrics(text, 12.5)
    assert (12.5, "servecap_requests_running", "", 3.0) in rows
    assert (12.5, "x_seconds_bucket", 'a="1",b="2",le="0.1"', 4.0) in rows
    assert (12.5, "x_seconds_count", 'a="1",b="2"', 5.0) in rows


def test_scraper_writes_server_metrics_csv_from_a_live_endpoint(tmp_path):
    registry = CollectorRegistry()
    running = Gauge("servecap_requests_running", "running", registry=registry)
    ttft = Histogram("servecap_ttft_seconds", "ttft", ["strategy"], buckets=(0.05, 0.1), registry=registry)
    done = Counter("servecap_requests", "finished", registry=registry)
    port = _free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        running.set(2)
        ttft.labels("continuous").observe(0.07)
        scraper = start_scraper(f"http://127.0.0.1:{port}/metrics", tmp_path / "server_metrics.csv", 0.1)
        wait_until(lambda: scraper.scrapes >= 2, what="two scrapes of the first values")
        running.set(5)
        done.inc(3)
        changed_at = scraper.scrapes  # the next scrape may have begun before the change; the one after cannot
        wait_until(lambda: scraper.scrapes >= changed_at + 2, what="two scrapes after the change")
        scraper.stop()
    finally:
        server.shutdown()
    frame = pd.read_csv(tmp_path / "server_metrics.csv", keep_default_na=False)
    assert tuple(frame.columns) == METRIC_COLUMNS and scraper.scrapes >= 4 and scraper.failures == 0
    series = frame[frame.name == "servecap_requests_running"].value.tolist()
    assert series[0] == 2 and series[-1] == 5 and len(series) == scraper.scrapes
    bucket = frame[(frame.name == "servecap_ttft_seconds_bucket") & (frame.labels == 'le="0.1",strategy="continuous"')]
    assert set(bucket.value) == {1.0}
    assert frame[frame.name == "servecap_requests_total"].value.iloc[-1] == 3


def test_scraper_survives_an_unreachable_server(tmp_path, caplog):
    scraper = Scraper(f"http://127.0.0.1:{_free_port()}/metrics", tmp_path / "m.csv", 0.05).start()
    wait_until(lambda: scraper.failures >= 3, what="three failed scrapes")
    scraper.stop()
    assert scraper.failures >= 3 and scraper.scrapes == 0
    assert caplog.text.count("scraping") == 1  # said once, not every tick
    with pytest.raises(ValueError, match="http"):
        Scraper("localhost:9/metrics", tmp_path / "m.csv")


@pytest.mark.slow
def test_servecap_sample_command(tmp_path):
    with scripted_server(tmp_path) as (url, _):
        proc = subprocess.run([sys.executable, "-m", "servecap", "sample", "--out", str(tmp_path / "run"),
                               "--interval", "0.2", "--duration", "1", "--metrics-url", f"{url}/metrics"],
                              capture_output=True, text=True, timeout=30, env=_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    samples = pd.read_csv(tmp_path / "run" / "samples.csv")
    metrics = pd.read_csv(tmp_path / "run" / "server_metrics.csv")
    assert len(samples) >= 4 and set(samples.source) <= {"host", "nvml"}
    assert "scripted_requests_running" in set(metrics.name)
    bad = subprocess.run([sys.executable, "-m", "servecap", "sample", "--out", str(tmp_path), "--interval", "0"],
                         capture_output=True, text=True, timeout=30, env=_env(), cwd=REPO)
    assert bad.returncode == 2 and "--interval must be > 0" in bad.stderr and "Traceback" not in bad.stderr
