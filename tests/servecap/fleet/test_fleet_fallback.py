"""A short real fallback tier: `servecap fleet --fallback depth:1,errors` with an emulated 8B primary and a
1B fallback, each behind its own vLLM router, nginx in front with the primary's router at `max_conns=1`
and the fallback's as its `backup`, and an error burst given to the primary mid-run.

What must hold: every request is answered, by the tier nginx names; the primary never holds two requests
at once (max_conns); a request that arrives while it holds one goes to the fallback; once the burst
starts, the primary's router answers 503 (its retries spent, then its circuit open) and nginx passes each
such request on to the fallback, so no client sees an error; fleet.json judges each tier on its share.

The router's circuit opens after 3 failures here, so the first request that meets the burst opens it (its
own attempts are 5). At the default 10 it took the burst's first two requests, and whether a second one
reached the primary before the burst ended, its last retry inside it, was a matter of milliseconds: the
test passed or failed on the machine's timing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contract.records import read_records
from fleet_runs import run_fleet
from reports.report import ReportOptions, write_report
from servecap.fleet.split_proxy import NGINX

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(300),
              pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is not installed (make test-e2e-rest "
                                                                  "installs it as root)")]

BURST_AT_S = 5.0


def test_a_fallback_tier_takes_what_the_full_or_failing_primary_cannot_and_no_request_fails(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,3\n9,3\n")
    out = tmp_path / "fleet"
    fleet, result = run_fleet(out, "--emulate", "l4", "--model", "llama-3.1-8b", "--server-args", "--max-model-len 2048",
                              "--rate-curve", str(curve), "--horizon", "9", "--prompt-tokens", "256",
                              "--output-tokens", "16", "--replicas", "1", "--fallback", "depth:1,errors",
                              "--fallback-model", "llama-3.2-1b",
                              "--replica-fault", f"0:errors:status=503,at={BURST_AT_S:g},for=2",
                              "--cb-failure-threshold", "3",
                              "--slo-ttft-ms", "3000", "--window-s", "3")
    section = fleet["fallback"]
    records = read_records(out / "requests.jsonl")
    assert len(records) == fleet["demand"]["requests"] == fleet["accounting"]["sent"]
    assert fleet["accounting"]["by_status"] == {"ok": len(records)} and section["unattributed"] == 0
    tiers = [r["replica"].partition("/")[0] for r in records]
    assert set(tiers) <= {"primary", "fallback", "fallback_after_error"}
    assert {"primary", "fallback", "fallback_after_error"} <= set(tiers)

    # max_conns=1: the primary's answers never overlap (beyond the moment nginx and the client see an end apart)
    t0 = fleet["t0_unix"]
    spans = sorted((r["t_sched"] - t0, r["t_sched"] - t0 + r["e2e_s"]) for r, t in zip(records, tiers) if t == "primary")
    assert all(start >= end - 0.05 for (_, end), (start, _) in zip(spans, spans[1:]))
    # before the burst, a request goes to the fallback only while the primary holds one (later, the primary also
    # holds a request while its router spends its retries on it, before nginx passes it on)
    full = [r["t_sched"] - t0 for r, t in zip(records, tiers) if t == "fallback" and r["t_sched"] - t0 < BURST_AT_S]
    assert full
    assert all(any(start - 0.05 <= sent <= end + 0.05 for start, end in spans) for sent in full)
    # from the burst on, the primary answers nothing (its router's retries fail, then its circuit stays open)
    late = [t for r, t in zip(records, tiers) if r["t_sched"] - t0 > BURST_AT_S + 0.5]
    assert late and "primary" not in late and "fallback_after_error" in late

    assert section["left_errors"] == tiers.count("fallback_after_error")
    assert section["left_full"] == tiers.count("fallback")
    shares = section["tiers"]
    assert shares["primary"]["requests"] == tiers.count("primary")
    assert shares["primary"]["share"] + shares["fallback"]["share"] == pytest.approx(1.0)
    served = {r["name"]: r["served"] for r in fleet["replicas"] + section["replicas"]}
    assert served == {"r0": tiers.count("primary"), "f0": len(tiers) - tiers.count("primary")}
    assert "fallback answered" in result.stderr

    # the run's report answers per tier, from fleet.json, beside the replay's own pages
    write_report(out, ReportOptions(figures=False))
    summary = json.loads((out / "summary.json").read_text())
    assert [(row["policy"], row["part"], row["requests"]) for row in summary["policies"]] == [
        ("fallback", "primary", tiers.count("primary")), ("fallback", "fallback", len(tiers) - tiers.count("primary")),
        ("accounting", "sent", len(records))]
    assert "## Traffic policies (servecap fleet)" in (out / "report.md").read_text()
