"""Open-loop arrivals through Locust: achieved rate, schedule fidelity (KS), lateness."""

import numpy as np
import pytest
from scipy import stats

from contract.arrivals import parse_arrival, schedule_offsets
from contract.loadgen_meta import read_meta
from contract.records import read_records
from loadgen_helpers import run_locust, scripted_server

pytestmark = pytest.mark.slow

RATE = 30.0  # mean gap 33 ms: a loaded CI box's few-ms send jitter does not reshape it


def test_poisson_open_loop_rate_and_inter_arrivals(tmp_path):
    records = tmp_path / "r.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.02", "--itl", "0.004") as (url, _):
        proc = run_locust("--host", url, "-u", "1", "-r", "1", "-t", "6s", "--arrival", "poisson",
                          "--rates", str(RATE), "--seed", "3", "--output-tokens", "4", "--prompt-tokens", "16",
                          "--records", str(records))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = sorted(read_records(records), key=lambda r: r["t_sched"])
    assert len(rows) > 120 and all(r["level"] == "rps=30" for r in rows)
    assert {r["status"] for r in rows} <= {"ok", "incomplete"}
    t_sched = np.array([r["t_sched"] for r in rows])
    t_start = np.array(sorted(r["t_start"] for r in rows))

    # the recorded intended times are exactly the seeded schedule
    expected = schedule_offsets(parse_arrival("poisson", RATE), seed=3, n=len(rows))
    assert np.allclose(t_sched - t_sched[0], expected, atol=1e-6)

    # achieved rate = the schedule's own rate (a Poisson sample of ~400 arrivals differs from
    # --rate by ~5% by chance; the schedule's long-run rate is checked in test_loadgen_arrivals)
    achieved = (len(t_start) - 1) / (t_start[-1] - t_start[0])
    realized = (len(expected) - 1) / expected[-1]
    assert achieved == pytest.approx(realized, rel=0.02)

    # both intended and actual gaps are exponential at RATE (KS test), and not at another rate
    for gaps in (np.diff(t_sched), np.diff(t_start)):
        assert stats.kstest(gaps, "expon", args=(0, 1 / RATE)).pvalue > 0.01
    assert stats.kstest(np.diff(t_start), "expon", args=(0, 1 / (2 * RATE))).pvalue < 1e-4

    lateness = t_start - np.sort(t_sched)
    assert np.median(lateness) < 0.002 and lateness.min() > -1e-4  # never early
    meta = read_meta(records)["levels"]["rps=30"]
    (process,) = meta["processes"].values()
    assert process["lateness_p50_s"] == pytest.approx(float(np.median(lateness)), abs=1e-3)
    assert process["inflight_cap_hits"] == 0


def test_constant_open_loop_rate_within_5_percent(tmp_path):
    records = tmp_path / "r.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.01", "--itl", "0.002") as (url, _):
        proc = run_locust("--host", url, "-u", "1", "-r", "1", "-t", "3s", "--arrival", "constant",
                          "--rates", "50", "--output-tokens", "3", "--records", str(records))
    assert proc.returncode == 0, proc.stderr[-3000:]
    t_start = np.sort([r["t_start"] for r in read_records(records)])
    assert len(t_start) > 120
    achieved = (len(t_start) - 1) / (t_start[-1] - t_start[0])
    assert achieved == pytest.approx(50.0, rel=0.05)
    assert abs(np.median(np.diff(t_start)) - 0.02) < 0.001


def test_constant_arrivals_with_inflight_cap_are_reported(tmp_path):
    records = tmp_path / "r.jsonl"
    # each request takes ~0.2 s; 40 rps needs ~8 in flight but the cap is 2
    with scripted_server(tmp_path, "--ttft", "0.2", "--itl", "0.01") as (url, _):
        proc = run_locust("--host", url, "-u", "1", "-r", "1", "-t", "2s", "--arrival", "constant",
                          "--rates", "40", "--max-inflight", "2", "--output-tokens", "1", "--records", str(records))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "--max-inflight" in proc.stderr
    meta = read_meta(records)["levels"]["rps=40"]
    assert meta["limited_by_loadgen"] is True
    (process,) = meta["processes"].values()
    assert process["inflight_cap_hits"] > 0 and process["lateness_p99_s"] > 0.05
    rows = read_records(records)
    assert len(rows) < 40  # arrivals waited for the cap instead of piling up


def test_the_open_loop_sends_nothing_after_its_run_time_and_lets_its_last_requests_finish(tmp_path):
    """-t 2s with --stop-timeout 20 (the sweep gives 30 s): the driver stops at 2 s and only waits for
    the requests in flight; before, it went on sending until the stop timeout killed it."""
    records = tmp_path / "r.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.3", "--itl", "0.01") as (url, _):
        proc = run_locust("--host", url, "-u", "1", "-r", "1", "-t", "2s", "--stop-timeout", "20",
                          "--arrival", "constant", "--rates", "20", "--output-tokens", "3", "--records", str(records))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_records(records)
    starts = np.array([r["t_sched"] for r in rows])
    assert starts.max() - starts.min() < 2.1          # no slot scheduled past the run time
    assert 30 <= len(rows) <= 42                      # about 2 s x 20/s (the first slot waits for the start)
    assert {r["status"] for r in rows} == {"ok"}      # the last ones finished within the stop timeout
    ends = np.array([r["t_start"] + r["e2e_s"] for r in rows])
    assert ends.max() - starts.min() < 3.0            # and the test ended with them, not 20 s later
