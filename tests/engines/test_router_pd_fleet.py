"""A disaggregated fleet for real: `servecap fleet --topology 1p1d` (an emulated prefill worker and decode worker
behind `vllm-router --vllm-pd-disaggregation`), and `servecap plan --topology 1p1d` with the same flags.

vLLM's router is a third-party engine component, so this runs in the real-engine suite. What must hold:
every request of the demand is sent and answered through the router; each names the decode worker that
answered it (its `x-servecap-replica`, passed through the router); the fleet is judged per window over every
request, as the plan judges its windows; the plan's windows hold the same requests, and its p99 TTFT per
window is the same order as the fleet's (the figures are the bench's: lab/servecap/plan_vs_fleet.py).
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


def test_a_disaggregated_fleet_runs_behind_the_pd_router_and_the_plan_predicts_it(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,2\n20,2\n")
    shared = ["--rate-curve", str(curve), "--horizon", "20", "--prompt-tokens", "2000", "--output-tokens", "32",
              "--topology", "1p1d", "--slo-ttft-ms", "2000", "--window-s", "10"]
    fleet_out, plan_out = tmp_path / "fleet", tmp_path / "plan"
    fleet, _ = run_fleet(fleet_out, "--emulate", "h100-sxm", "--model", "llama-3.1-8b", "--server-args",
                         "--max-model-len 4096", *shared)
    assert fleet["disaggregated"] == {"topology": "1p1d", "prefill_workers": 1, "decode_workers": 1}
    records = read_records(fleet_out / "requests.jsonl")
    assert len(records) == fleet["demand"]["requests"] > 20
    assert all(r["status"] == "ok" for r in records)
    assert {r["replica"] for r in records} == {"r1"}   # the decode worker answers every request
    served = {r["name"]: r["served"] for r in fleet["replicas"]}
    assert served == {"r0": 0, "r1": len(records)}
    assert sum(w["requests"] for w in fleet["outcome"]["windows"]) == len(records)
    assert all(r["prompt_tokens"] >= 2000 for r in records)

    result = subprocess.run(
        [sys.executable, "-m", "servecap", "plan", "--gpu", "h100-sxm", "--model", "llama-3.1-8b",
         "--max-model-len", "4096", *shared, "--out", str(plan_out), "--json"],
        capture_output=True, text=True, timeout=120, env=_env())
    assert result.returncode == 0, result.stderr[-2000:]
    plan = json.loads((plan_out / "plan.json").read_text())
    assert plan["plan"]["config"]["disaggregated"]["topology"] == "1p1d"
    assert plan["plan"]["requests"] == len(records)   # the same demand, request for request
    measured = {w["start_s"]: w for w in fleet["outcome"]["windows"]}
    for window in plan["windows"]:
        other = measured[window["start_s"]]
        assert window["requests"] == other["requests"]
        assert 0.2 < window["ttft_p99_s"] / other["ttft_p99_s"] < 5   # the same order; the bench gives the error


def test_a_killed_decode_worker_fails_its_streams_is_not_replaced_and_the_plan_counts_the_same_loss(tmp_path):
    """`--topology 1p2d --kill 8:2`: decode worker r2 leaves the router and is killed at 8 s. Each decode
    worker holds several long streams at once (1,024 tokens at 1.5 requests a second each), so r2 holds some
    at the kill: they fail, and so does any request already paired with it whose prefill ends after it. Every
    later request goes to r1; r2 is not replaced (the PD router adds no worker while it runs); every request
    is accounted for; the plan of the same flags loses requests too, the same order of them."""
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,3\n16,3\n")
    shared = ["--rate-curve", str(curve), "--horizon", "16", "--prompt-tokens", "512", "--output-tokens", "1024",
              "--topology", "1p2d", "--kill", "8:2", "--slo-ttft-ms", "2000", "--window-s", "8"]
    fleet_out, plan_out = tmp_path / "fleet", tmp_path / "plan"
    fleet, _ = run_fleet(fleet_out, "--emulate", "h100-sxm", "--model", "llama-3.1-8b", "--server-args",
                         "--max-model-len 4096", *shared)
    events = [(e["event"], e["replica"]) for e in fleet["events"]]
    assert events == [("killed", "r2"), ("not replaced", "r2")]
    assert [r["name"] for r in fleet["replicas"]] == ["r0", "r1", "r2"]
    killed_at = fleet["events"][0]["t_s"]
    records = read_records(fleet_out / "requests.jsonl")
    accounting = fleet["accounting"]
    assert accounting["sent"] == len(records) == fleet["demand"]["requests"] and accounting["missing"] == 0
    failed = [r for r in records if r["status"] != "ok"]
    assert failed and sum(accounting["by_status"].values()) == len(records)
    t0 = fleet["t0_unix"]
    assert all(r["t_start"] - t0 < killed_at + 0.5 for r in failed)   # only what was in flight or paired then
    after = [r for r in records if r["t_start"] - t0 > killed_at + 0.5]
    assert after and all(r["status"] == "ok" and r["replica"] == "r1" for r in after)

    result = subprocess.run(
        [sys.executable, "-m", "servecap", "plan", "--gpu", "h100-sxm", "--model", "llama-3.1-8b",
         "--max-model-len", "4096", *shared, "--out", str(plan_out), "--json"],
        capture_output=True, text=True, timeout=120, env=_env())
    assert result.returncode == 0, result.stderr[-2000:]
    plan = json.loads((plan_out / "plan.json").read_text())["plan"]
    assert plan["requests"] == len(records) and plan["replicas_killed"] == 1 and plan["replicas_started"] == 3
    assert 0.5 <= plan["lost_requests"] / len(failed) <= 2   # the same order; the bench gives the error
