"""`--hedge-after` through the real `locust`: a request that shows nothing after the delay is sent again to
`--hedge-host`; the first to show is kept, the other cancelled on its server; every request is in the records."""

import time
from collections import Counter

import pytest

from contract.records import read_records
from loadgen_helpers import read_truth, run_locust, scripted_server

pytestmark = pytest.mark.slow


def test_a_slow_replicas_requests_are_hedged_to_a_fast_one_and_cancelled_there(tmp_path):
    records = tmp_path / "r.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.4", "--itl", "0.01") as (slow, slow_truth), \
            scripted_server(tmp_path, "--ttft", "0.005", "--itl", "0.01") as (fast, fast_truth):
        proc = run_locust("--host", slow, "-u", "2", "-r", "2", "-t", "2s", "--hedge-after", "100ms",
                          "--hedge-host", fast, "--output-tokens", "4", "--prompt-tokens", "8",
                          "--records", str(records))
        assert proc.returncode == 0, proc.stderr[-3000:]
        rows = read_records(records)
        kinds = Counter((r["hedge"], r["status"]) for r in rows)
        pairs = kinds[("copy", "ok")]
        assert pairs >= 20 and kinds[("primary", "cancelled")] == pairs
        assert set(kinds) <= {("copy", "ok"), ("primary", "cancelled"), (None, "incomplete")}
        assert len({r["request_id"] for r in rows}) == len(rows)   # each copy its own request
        for row in rows:
            if row["hedge"] == "copy":
                # sent 100 ms after its primary, and kept with the time the user waited from the first send
                assert 0.1 <= row["hedge_delay_s"] < 0.12
                assert row["hedge_delay_s"] < row["ttft_s"] < row["hedge_delay_s"] + 0.05
        time.sleep(0.5)   # the slow server notices a client left when it next writes (0.4 s after it read)
        aborted = [t for t in read_truth(slow_truth).values() if t.get("aborted")]
        assert len(aborted) >= pairs   # every cancelled primary left its server
        # the same test against the fast replica: nothing shows after 100 ms, so nothing is hedged
        quick = tmp_path / "q.jsonl"
        proc = run_locust("--host", fast, "-u", "2", "-r", "2", "-t", "1s", "--hedge-after", "100ms",
                          "--output-tokens", "4", "--prompt-tokens", "8", "--records", str(quick))
        assert proc.returncode == 0, proc.stderr[-3000:]
        rows = read_records(quick)
        assert {r["hedge"] for r in rows} == {None} and {r["status"] for r in rows} <= {"ok", "incomplete"}
        assert len(rows) > 30 and len(read_truth(fast_truth)) >= len(rows) + pairs - 2
