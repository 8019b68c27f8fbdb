"""loadgen/classify.py over gRPC (`--protocol grpc`) against the reference server: the records name the
protocol and carry the server's ids; a request the server refuses is recorded with its gRPC status."""

from __future__ import annotations

import pytest

from contract.records import check_record, read_records
from loadgen_helpers import REPO, run_locust

pytestmark = pytest.mark.slow
CLASSIFY = str(REPO / "loadgen" / "classify.py")


@pytest.mark.parametrize("protocol", ["grpc", "rest"])
def test_classify_records_name_the_protocol(reference_server_tiny, tmp_path, protocol):
    records = tmp_path / "r.jsonl"
    # 4 and 8 rows: the shared server's preferred batch sizes, so no request waits its 1 s delay
    result = run_locust("--host", reference_server_tiny.base_url, "-u", "2", "-r", "2", "-t", "2s",
                        "--model", "iris-like", "--protocol", protocol, "--grpc-target", reference_server_tiny.grpc_target, "--rows", "8",
                        "--records", str(records), "--level", f"{protocol}/c=2", locustfile=CLASSIFY)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_records(records)
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) >= 10 and all(check_record(r) == [] for r in rows)
    assert all(r["protocol"] == protocol and r["prompt_tokens"] == 8 and r["e2e_s"] > 0 for r in ok)
    ids = [r["response_id"] for r in ok]
    assert all(i.startswith("req-") for i in ids) and len(set(ids)) == len(ids)   # the server echoed each id


def test_a_refused_grpc_request_is_recorded_with_its_status(reference_server_tiny, tmp_path):
    records = tmp_path / "r.jsonl"
    result = run_locust("--host", reference_server_tiny.base_url, "-u", "1", "-r", "1", "-t", "1s",
                        "--model", "iris-like", "--protocol", "grpc", "--grpc-target", reference_server_tiny.grpc_target,
                        "--features", "5", "--exit-code-on-error", "0",
                        "--records", str(records), locustfile=CLASSIFY)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [r for r in read_records(records) if r["status"] != "incomplete"]
    assert rows and all(r["status"] == "grpc_invalid_argument" for r in rows)
    assert "input shape must be [n, 6]" in rows[0]["error"] and check_record(rows[0]) == []
