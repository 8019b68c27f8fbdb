"""`--trace`: requests go out open loop at the trace's times (sped up), with its lengths, then the test ends."""

import json
import time

import numpy as np
import pytest

from contract.records import read_records
from loadgen_helpers import read_truth, run_locust, scripted_server

pytestmark = pytest.mark.slow


def test_mooncake_trace_is_replayed_at_its_times_with_its_lengths(tmp_path):
    trace = tmp_path / "trace.jsonl"
    rows = [{"timestamp": 200 * i, "input_length": 20 + i, "output_length": 2 + i % 3, "hash_ids": [0, i]}
            for i in range(10)]
    trace.write_text("".join(json.dumps(row) + "\n" for row in rows))
    records = tmp_path / "r.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.005", "--itl", "0.001") as (url, truth_path):
        # 1.8 s of trace at 2x: 0.9 s; -t 20s must not be needed, the test ends with the trace, and the user
        # that drove it ends itself then: the sweep's --stop-timeout 30 is not waited out
        started = time.monotonic()
        proc = run_locust("--host", url, "-u", "1", "-r", "1", "-t", "20s", "--stop-timeout", "30", "--trace",
                          str(trace), "--trace-speedup", "2", "--trace-block-tokens", "8", "--records", str(records),
                          timeout=60)
        took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert took < 20, f"locust ran {took:.1f} s: past the trace, to its -t or its stop timeout"
    truth = read_truth(truth_path)
    got = sorted(read_records(records), key=lambda r: r["t_sched"])
    assert len(got) == 10 and all(r["status"] == "ok" and r["level"] == "trace" for r in got)
    offsets = np.array([r["t_sched"] for r in got]) - got[0]["t_sched"]
    assert offsets == pytest.approx([0.1 * i for i in range(10)], abs=1e-6)   # 200 ms apart, 2x faster
    assert [r["output_tokens_asked"] for r in got] == [row["output_length"] for row in rows]
    assert [r["prompt_tokens_asked"] for r in got] == [row["input_length"] for row in rows]
    assert all(truth[r["response_id"]]["max_tokens"] == r["output_tokens_asked"] for r in got)
    assert all(0 <= r["queue_s"] < 0.05 for r in got)
    # the whole run took about the trace's length, not the 20 s limit
    assert got[-1]["t_start"] - got[0]["t_start"] < 2


def test_trace_flags_that_do_not_fit_exit_2(tmp_path):
    trace = tmp_path / "azure.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,5,1\nlater,5,1\n")
    bad = run_locust("--host", "http://127.0.0.1:9", "-u", "1", "-r", "1", "-t", "1s", "--trace", str(trace))
    assert bad.returncode == 2 and "azure.csv: line 3: TIMESTAMP 'later'" in bad.stderr, bad.stderr
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,5,1\n")
    bad = run_locust("--host", "http://127.0.0.1:9", "-u", "1", "-r", "1", "-t", "1s", "--trace", str(trace),
                     "--arrival", "poisson", "--rates", "3")
    assert bad.returncode == 2 and "--trace sets the send times itself" in bad.stderr and "Traceback" not in bad.stderr
