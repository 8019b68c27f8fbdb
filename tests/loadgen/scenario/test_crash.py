"""SIGKILL mid-run: the records file keeps every finished request; only a last line may be torn."""

import os
import signal

import pytest

from contract.records import check_record, read_records_with_status
from loadgen_helpers import read_truth, scripted_server, start_locust
from waiting import wait_until

pytestmark = pytest.mark.slow


def test_sigkill_leaves_parseable_records(tmp_path):
    records = tmp_path / "requests.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.005", "--itl", "0.001") as (url, truth_path):
        proc = start_locust("--host", url, "-u", "8", "-r", "8", "-t", "60s", "--output-tokens", "uniform:50:400",
                            "--records", str(records))
        try:
            wait_until(lambda: records.exists() and records.read_bytes().count(b"\n") >= 40, timeout=30,
                       what="40 finished requests in the records file")
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        result = read_records_with_status(records)  # raises on any bad line but a torn last one
        recorded = {r["response_id"] for r in result.records}

        def finished_once_all_recorded_are_logged() -> set[str] | None:
            # the server logs a response just after its last byte, so Locust may record it first
            finished = {rid for rid, row in read_truth(truth_path).items() if not row["aborted"]}
            return finished if recorded <= finished else None

        finished_by_server = wait_until(finished_once_all_recorded_are_logged,
                                        what="the server logging every response Locust recorded as finished")
    assert proc.returncode == -signal.SIGKILL
    assert len(result.records) >= 40
    assert all(check_record(r) == [] and r["status"] == "ok" for r in result.records)
    # what is missing is at most the requests in flight at the kill (8 users)
    assert len(finished_by_server - recorded) <= 8 + 1
