"""`locust --processes N` with loadgen/chat.py: one records file from every worker, each request once,
the open-loop schedule shared, each worker's loop lag in the meta, and workers pinned on request."""

import numpy as np
import pytest

from contract.loadgen_meta import read_meta
from contract.records import read_records
from loadgen_helpers import run_locust, scripted_server

pytestmark = pytest.mark.slow


def test_two_processes_share_an_open_loop_schedule_and_write_each_request_once(tmp_path):
    records = tmp_path / "r.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.005", "--itl", "0.002") as (url, _):
        proc = run_locust("--host", url, "--processes", "2", "-u", "2", "-r", "2", "-t", "3s", "--arrival", "constant",
                          "--rates", "40", "--output-tokens", "4", "--records", str(records), "--level", "p2",
                          "--worker-cpus", "0", timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_records(records)
    workers = {r["worker"] for r in rows}
    assert len(workers) == 2 and all(w.startswith("worker") for w in workers)
    assert len({r["request_id"] for r in rows}) == len(rows)
    slots = np.sort([r["t_sched"] for r in rows])
    assert np.median(np.diff(slots)) == pytest.approx(1 / 40, abs=2e-3)   # one schedule, interleaved
    meta = read_meta(records)["levels"]["p2"]
    assert set(meta["processes"]) == workers
    assert all(p["loop_lag_samples"] > 100 for p in meta["processes"].values())
    assert meta["loop_lag_p99_s"] == max(p["loop_lag_p99_s"] for p in meta["processes"].values())
    assert proc.stderr.count("pinned to core 0") == 2
