"""Distributed Locust (a master and two workers on loopback) -> one records file, each request once."""

import json
import signal

import numpy as np
import pytest

from contract.loadgen_meta import read_meta
from contract.records import check_record, read_records
from loadgen_helpers import read_truth, scripted_server, start_locust
from servecap.launch.process import free_port
from waiting import wait_until

pytestmark = pytest.mark.slow


def _workers_recorded(records) -> set[str]:
    return {row["worker"] for row in read_records(records)} if records.exists() else set()


def _run_distributed(url: str, records, *extra: str, run_time: str = "2s", stop_one_worker: bool = False) -> str:
    port = free_port()
    workers = [start_locust("--worker", "--master-host", "127.0.0.1", "--master-port", str(port), headless=False)
               for _ in range(2)]
    master = start_locust("--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                          "--expect-workers", "2", "--host", url, "-t", run_time, "--records", str(records), *extra)
    try:
        if stop_one_worker:  # once both are sending, so the one stopped has records to lose
            wait_until(lambda: len(_workers_recorded(records)) == 2, timeout=30, interval=0.05,
                       what="records from both workers")
            workers[0].send_signal(signal.SIGTERM)
            workers[0].wait(timeout=20)
        out, _ = master.communicate(timeout=60)
        assert master.returncode == 0, out[-3000:]
        for worker in workers:
            worker.wait(timeout=20)
        return out
    finally:
        for proc in (master, *workers):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_master_and_two_workers_write_every_request_exactly_once(tmp_path):
    records = tmp_path / "requests.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.02", "--itl", "0.005") as (url, truth_path):
        _run_distributed(url, records, "-u", "4", "-r", "4", "--output-tokens", "uniform:3:30",
                         "--json-file", str(tmp_path / "stats"))
    rows = read_records(records)
    truth = read_truth(truth_path)
    ids = [r["response_id"] for r in rows if r["response_id"] is not None]
    no_id = [r for r in rows if r["response_id"] is None]  # stopped before the first byte came back
    assert len(rows) >= 20 and all(check_record(r) == [] for r in rows)
    assert all(r["status"] == "incomplete" for r in no_id)
    assert len(ids) == len(set(ids)), "a request was written twice"
    assert set(ids) <= set(truth), "a record matches no server response"
    missing = set(truth) - set(ids)
    assert len(missing) <= len(no_id), f"server answered requests missing from the records: {missing}"
    workers = {r["worker"] for r in rows}
    assert len(workers) == 2 and all(w.startswith("worker") for w in workers)
    assert {r["level"] for r in rows} == {"c=4"}
    meta = read_meta(records)["levels"]["c=4"]
    assert set(meta["processes"]) == workers
    assert sum(p["requests_sent"] for p in meta["processes"].values()) == len(rows)
    # the master's Locust stats count each finished request once; the workers' token stats merge
    ok = [r for r in rows if r["status"] == "ok"]
    (entry,) = json.loads((tmp_path / "stats.json").read_text())
    assert entry["num_requests"] == len(ok)
    tokens = {e["name"]: e["num_requests"] for e in json.loads((tmp_path / "stats.tokens.json").read_text())}
    assert tokens == {"TTFT": len(ok), "TPOT": len(ok), "E2E": len(ok), "ITL": sum(len(r["itl_s"]) for r in ok)}
    for row in rows:  # an in-flight request at stop is kept as incomplete, with what had arrived
        if row["status"] == "incomplete" and row["response_id"] is not None:
            assert truth[row["response_id"]]["aborted"] or len(row["itl_s"]) < truth[row["response_id"]]["max_tokens"]


def test_distributed_open_loop_splits_one_schedule(tmp_path):
    records = tmp_path / "requests.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.01", "--itl", "0.002") as (url, _):
        _run_distributed(url, records, "-u", "2", "-r", "2", "--arrival", "constant", "--rates", "40",
                         "--output-tokens", "2")
    rows = read_records(records)
    by_worker = {}
    for row in rows:
        by_worker.setdefault(row["worker"], []).append(row["t_sched"])
    assert len(by_worker) == 2
    merged = np.sort([t for ts in by_worker.values() for t in ts])
    # two workers, alternate slots of one constant schedule: merged gaps are 1/40 s
    assert len(merged) > 25 and np.allclose(np.diff(merged), 0.025, atol=1e-6)
    assert abs(len(by_worker[next(iter(by_worker))]) - len(merged) / 2) <= 2


def test_a_worker_that_stops_early_loses_nothing(tmp_path):
    records = tmp_path / "requests.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.02", "--itl", "0.005") as (url, truth_path):
        _run_distributed(url, records, "-u", "4", "-r", "4", "--output-tokens", "uniform:3:30",
                         run_time="4s", stop_one_worker=True)
    rows = read_records(records)
    truth = read_truth(truth_path)
    ids = [r["response_id"] for r in rows if r["response_id"] is not None]
    assert len(ids) == len(set(ids)) and set(ids) <= set(truth)
    assert len(set(truth) - set(ids)) <= len([r for r in rows if r["response_id"] is None])
    by_worker = {}
    for row in rows:
        by_worker.setdefault(row["worker"], []).append(row["t_start"])
    assert len(by_worker) == 2
    early, late = sorted(by_worker.values(), key=max)
    assert max(early) < max(late) - 1.0  # one worker really stopped early, and its records are all there
