"""A short real canary: `servecap fleet --canary-weight` with an emulated L4 replica per version (the canary
fp8) behind a vLLM router each, nginx splitting between the routers, and the weight raised mid-run.

What must hold: every request is answered by the version nginx named, the weight change is in the
timeline at its time and moves the split, each version's replicas served exactly its requests, and
fleet.json judges each version on its own share; the fp8 canary decodes faster than the bf16 primary.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from contract.records import read_records
from fleet_runs import run_fleet
from servecap.fleet.split_proxy import NGINX

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(300),
              pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is not installed (make test-e2e-rest "
                                                                  "installs it as root)")]

STEP_S = 10.0


def test_a_canary_fleet_splits_by_its_schedule_and_judges_each_version(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,3\n20,3\n")
    out = tmp_path / "fleet"
    fleet, result = run_fleet(out, "--emulate", "l4", "--model", "llama-3.1-8b", "--server-args", "--max-model-len 2048",
                              "--rate-curve", str(curve), "--horizon", "20", "--prompt-tokens", "256",
                              "--output-tokens", "32", "--replicas", "1", "--canary-weight", f"0:0.2,{STEP_S:g}:0.8",
                              "--canary-dtype", "fp8", "--slo-ttft-ms", "3000", "--window-s", "10")
    canary = fleet["canary"]
    records = read_records(out / "requests.jsonl")
    assert len(records) == fleet["demand"]["requests"] == fleet["accounting"]["sent"]
    assert fleet["accounting"]["by_status"] == {"ok": len(records)} and canary["unattributed"] == 0
    assert {r["replica"] for r in records} == {"primary/r0", "canary/c0"}

    # the weight moved at its time, and the split with it
    events = [row for row in csv.DictReader((out / "fleet_timeline.csv").open()) if row["event"].startswith("canary")]
    assert [row["event"] for row in events] == ["canary weight 0.8"]
    assert float(events[0]["t_s"]) == pytest.approx(STEP_S, abs=1.0)
    t0 = fleet["t0_unix"]
    before = [r["replica"] == "canary/c0" for r in records if r["t_sched"] - t0 < STEP_S - 1]
    after = [r["replica"] == "canary/c0" for r in records if r["t_sched"] - t0 > STEP_S + 1]
    assert sum(before) / len(before) < 0.5 < sum(after) / len(after)

    # each version's replicas served exactly its requests; each judged on its own share
    served = {r["name"]: r["served"] for r in fleet["replicas"] + canary["replicas"]}
    counts = {v: sum(r["replica"].startswith(v + "/") for r in records) for v in ("primary", "canary")}
    assert served == {"r0": counts["primary"], "c0": counts["canary"]}
    assert canary["primary"]["requests"] == counts["primary"] and canary["canary"]["requests"] == counts["canary"]
    assert canary["primary"]["share"] + canary["canary"]["share"] == pytest.approx(1.0)
    assert "fp8" in canary["replica"] and canary["canary"]["attainment"] is not None
    assert canary["canary"]["tpot_p50_s"] < 0.9 * canary["primary"]["tpot_p50_s"]   # fp8 weights: less to read per step
    assert "nginx split_clients" in result.stderr
