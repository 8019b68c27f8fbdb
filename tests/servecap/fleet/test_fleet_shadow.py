"""A real shadow fleet: `servecap fleet --shadow-fraction 1` with an emulated L4 in production and an fp8 one as
the shadow, each behind its own vllm-router, Debian's nginx mirroring every request. Production answers every
request as before; the shadow's engines finish a copy of each, judged on their own records."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.records import read_records
from fleet_runs import run_fleet
from servecap.fleet.split_proxy import NGINX

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(300),
              pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is not installed (make test-e2e-rest "
                                                                  "installs it as root)")]


def test_a_shadow_fleet_finishes_a_copy_of_every_request_that_no_client_sees(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,3\n20,3\n")
    out = tmp_path / "fleet"
    fleet, result = run_fleet(out, "--emulate", "l4", "--model", "llama-3.1-8b", "--server-args", "--max-model-len 2048",
                              "--rate-curve", str(curve), "--horizon", "20", "--prompt-tokens", "256",
                              "--output-tokens", "32", "--replicas", "1", "--shadow-fraction", "1",
                              "--shadow-dtype", "fp8", "--slo-ttft-ms", "3000", "--window-s", "10")
    shadow, records = fleet["shadow"], read_records(out / "requests.jsonl")
    sent = fleet["demand"]["requests"]
    # production: every request answered by r0, as without a shadow; no record names a shadow replica
    assert len(records) == sent == fleet["accounting"]["sent"] and fleet["accounting"]["by_status"] == {"ok": sent}
    assert {r["replica"] for r in records} == {"r0"}
    # the shadow: its engine finished one copy of each request (nothing cut off by the mirror), after the
    # replay began, each 32 tokens long; its answers stored by nginx, none returned
    assert shadow["mirrored"] == sent and shadow["mirrored_share"] == 1.0 and shadow["fraction"] == 1.0
    assert [r["name"] for r in shadow["replicas"]] == ["s0"] and shadow["replicas"][0]["finished"] == sent
    assert shadow["requests"] == sent and shadow["unfinished"] == 0 and shadow["ttft_p99_s"] > 0
    assert "fp8" in shadow["replica"] and len(list((out / "proxy" / "answers").iterdir())) >= sent
    assert "nginx mirror" in result.stderr and "shadow: " in result.stderr
