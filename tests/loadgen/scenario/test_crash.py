"""SIGKILL mid-run: the records file keeps every finished request; only a last line may be torn."""

import os
import signal
import time

import pytest

from servecap.contract.records import check_record, read_records_with_status
from loadgen_helpers import read_truth, scripted_server, start_locust

pytestmark = pytest.mark.slow


def test_sigkill_leaves_parseable_records(tmp_path):
    records = tmp_path / "requests.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.005", "--itl", "0.001") as (url, truth_path):
        proc = start_locust("--host", url, "-u", "8", "-r", "8", "-t", "60s", "--output-tokens", "uniform:50:400",
                            "--records", str(records))
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if records.exists() and records.read_bytes().count(b"\n") >= 40:
                    break
                time.sleep(0.05)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        time.sleep(0.2)
        truth = read_truth(truth_path)
    assert proc.returncode == -signal.SIGKILL
    result = read_records_with_status(records)  # raises on any bad line but a torn last one
    assert len(result.records) >= 40
    assert all(check_record(r) == [] and r["status"] == "ok" for r in result.records)
    finished_by_server = {rid for rid, row in truth.items() if not row["aborted"]}
    recorded = {r["response_id"] for r in result.records}
    assert recorded <= finished_by_server
    # what is missing is at most the requests in flight at the kill (8 users)
    assert len(finished_by_server - recorded) <= 8 + 1
