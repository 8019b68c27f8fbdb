"""Prometheus scraper (real HTTP endpoint from prometheus_client) and the `servecap sample` command."""

import socket
import subprocess
import sys

import pandas as pd
import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from loadgen.observe.scraper import METRIC_COLUMNS, ChangedOnly, Scraper, parse_metrics, start_scraper
from loadgen_helpers import REPO, _env, scripted_server
from contract.server_metrics import SCRAPE_MARKER
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


def test_parse_metrics_keeps_only_the_names_asked_for():
    text = "# TYPE a gauge\na 1\n# TYPE b gauge\nb 2\n"
    assert [row[1] for row in parse_metrics(text, 0.0, frozenset({"b"}))] == ["b"]


def test_changed_only_passes_a_sample_once_per_value():
    changed = ChangedOnly()
    assert changed([(1, "a", "", 1.0), (1, "b", "", 2.0)]) == [(1, "a", "", 1.0), (1, "b", "", 2.0)]
    assert changed([(2, "a", "", 1.0), (2, "b", 'x="1"', 2.0)]) == [(2, "b", 'x="1"', 2.0)]   # labels: another series
    assert changed([(3, "a", "", 4.0), (3, "b", "", 2.0)]) == [(3, "a", "", 4.0)]


def test_scraper_writes_server_metrics_csv_from_a_live_endpoint(tmp_path):
    registry = CollectorRegistry()
    running = Gauge("servecap_requests_running", "running", registry=registry)
    ttft = Histogram("servecap_time_to_first_token_seconds", "ttft", ["strategy"], buckets=(0.05, 0.1),
                     registry=registry)
    done = Counter("servecap_preemptions", "preempted", registry=registry)
    Gauge("python_unrelated", "not read by servecap", registry=registry).set(1)
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
    assert (frame.name == SCRAPE_MARKER).sum() == scraper.scrapes          # one marker row per scrape
    assert frame[frame.name == "servecap_requests_running"].value.tolist() == [2, 5]   # changes only
    bucket = frame[(frame.name == "servecap_time_to_first_token_seconds_bucket")
                   & (frame.labels == 'le="0.1",strategy="continuous"')]
    assert bucket.value.tolist() == [1.0]
    assert frame[frame.name == "servecap_preemptions_total"].value.tolist() == [0.0, 3.0]
    assert "python_unrelated" not in set(frame.name)


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
                               "--interval", "0.2", "--duration", "1", "--metrics-url", f"{url}/metrics", "--all-metrics"],
                              capture_output=True, text=True, timeout=30, env=_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    samples = pd.read_csv(tmp_path / "run" / "samples.csv")
    metrics = pd.read_csv(tmp_path / "run" / "server_metrics.csv")
    assert len(samples) >= 4 and set(samples.source) <= {"host", "nvml"}
    assert "scripted_requests_running" in set(metrics.name)
    bad = subprocess.run([sys.executable, "-m", "servecap", "sample", "--out", str(tmp_path), "--interval", "0"],
                         capture_output=True, text=True, timeout=30, env=_env(), cwd=REPO)
    assert bad.returncode == 2 and "--interval must be > 0" in bad.stderr and "Traceback" not in bad.stderr
