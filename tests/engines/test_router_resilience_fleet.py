"""The router's retries and circuit breaker for real: `servecap fleet` with one of two emulated replicas given an
error burst (`--replica-fault`), vllm-router started with the same retry and breaker flags the plan models,
then `servecap plan` with the same flags.

vLLM's router is a third-party engine component, so this runs in the real-engine suite. What must hold: the
replica is given the fault at its time (POST /admin/faults, loopback) and answers 503s it counts as injected;
the router retries every failed attempt on the other replica, so every request of the demand is answered and
none is lost; once the circuit opens the failing replica gets only the breaker's probes; and the plan counts
the same failed attempts at that replica, within one (the bench, lab/servecap/plan_vs_fleet.py, gives the
error on a longer run).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contract.records import read_records
from fleet_runs import run_fleet
from loadgen_helpers import _env

pytestmark = [pytest.mark.slow, pytest.mark.engine, pytest.mark.timeout(300)]


def test_a_replica_in_an_error_burst_is_retried_past_and_its_circuit_opens_as_planned(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,4\n20,4\n")
    shared = ["--rate-curve", str(curve), "--horizon", "20", "--prompt-tokens", "64", "--output-tokens", "16",
              "--replicas", "2", "--replica-fault", "1:errors:status=503,at=3,for=12", "--cb-failure-threshold", "3",
              "--cb-timeout-duration-secs", "5", "--slo-ttft-ms", "2000", "--window-s", "10", "--seed", "3"]
    fleet_out, plan_out = tmp_path / "fleet", tmp_path / "plan"
    fleet, _ = run_fleet(fleet_out, "--emulate", "h100-sxm", "--model", "llama-3.1-8b", "--server-args",
                         "--max-model-len 4096", *shared)
    assert fleet["controller_errors"] == []
    assert fleet["replica_faults"] == [{"replica": 1, "spec": "errors:status=503,rate=1,at=3s,for=12s"}]
    assert fleet["router_resilience"]["cb_failure_threshold"] == 3
    assert [e["detail"] for e in fleet["events"] if e["event"] == "fault"] == ["errors:status=503,rate=1,for=12s"]
    records = read_records(fleet_out / "requests.jsonl")
    assert len(records) == fleet["demand"]["requests"] > 60          # every request sent is accounted for
    assert all(r["status"] == "ok" for r in records)                 # each failed attempt retried on r0
    assert fleet["accounting"] == {"sent": len(records), "by_status": {"ok": len(records)}, "cancelled_copies": 0,
                                   "missing": 0}
    failed = fleet["injected_errors"]
    assert failed.get("r0", 0) == 0 and 3 <= failed["r1"] <= 8       # the breaker's threshold, then its probes
    t0 = fleet["t0_unix"]
    burst = [r for r in records if 4.0 <= r["t_sched"] - t0 < 15.0]
    assert sum(r["replica"] == "r1" for r in burst) == 0             # nothing answered by r1 in its burst

    result = subprocess.run(
        [sys.executable, "-m", "servecap", "plan", "--gpu", "h100-sxm", "--model", "llama-3.1-8b",
         "--max-model-len", "4096", "--cold-start-s", "0", *shared, "--no-n-plus-one", "--static-max", "2",
         "--out", str(plan_out), "--json"],
        capture_output=True, text=True, timeout=120, env=_env())
    assert result.returncode == 0, result.stderr[-2000:]
    plan = json.loads((plan_out / "plan.json").read_text())["plan"]
    assert plan["requests"] == len(records) and plan["errored_requests"] == 0
    assert abs(plan["router"]["failed_at"]["r1"] - failed["r1"]) <= 1
    assert plan["router"]["breaker_opened"]["r1"] >= 1
