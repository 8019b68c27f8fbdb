"""A fleet run's traffic policies as its report shows them (contract.fleet_policies): one row per policy and
part from fleet.json, every request counted once, and summary.json's `policies` read back as written."""

from __future__ import annotations

from contract.fleet_policies import PolicyRow, policy_rows
from contract.summary import Summary

OUTCOME = {"requests": 100, "attainment": 0.9, "ttft_p50_s": 0.1, "ttft_p99_s": 0.5, "e2e_p99_s": 2.0}


def _judged(requests: int, share: float, ttft_p99: float) -> dict:
    return {**OUTCOME, "requests": requests, "share": share, "ttft_p99_s": ttft_p99}


def test_a_run_without_a_policy_has_no_rows():
    assert policy_rows({"replicas": [{}], "outcome": OUTCOME, "accounting": {"sent": 100, "by_status": {"ok": 100}},
                        "canary": None, "shadow": None, "fallback": None, "hedging": None}) == ()


def test_each_policy_gives_a_row_per_part_and_the_accounting_counts_every_request_once():
    fleet = {"replicas": [{}, {}], "outcome": OUTCOME,
             "fallback": {"rule": "depth:16", "left_full": 30, "left_errors": 2,
                          "replicas": [{}], "tiers": {"primary": _judged(68, 0.68, 0.9),
                                                      "fallback": _judged(32, 0.32, 0.1)}},
             "hedging": {"after": "0.3s", "hedged": 12, "copies_kept": 5, "extra_requests": 0.12},
             "shadow": {"mirrored": 99, "mirrored_share": 0.99, "ttft_p99_s": 0.4, "replicas": [{}]},
             "accounting": {"sent": 100, "by_status": {"error": 3, "ok": 97}, "cancelled_copies": 7, "missing": 1}}
    rows = policy_rows(fleet)
    assert [(r.policy, r.part) for r in rows] == [("fallback", "primary"), ("fallback", "fallback"),
                                                  ("shadow", "production"), ("shadow", "shadow copies"),
                                                  ("hedging", "after 0.3s"), ("accounting", "sent")]
    primary, fallback = rows[0], rows[1]
    assert (primary.requests, primary.share, primary.replicas, primary.ttft_p99_s) == (68, 0.68, 2, 0.9)
    assert (fallback.requests, fallback.replicas) == (32, 1)
    assert fallback.note == "30 when the primary was full (depth:16), 2 after its error"
    assert (rows[3].requests, rows[3].share, rows[3].replicas) == (99, 0.99, 1)
    assert rows[4].share == 0.12 and rows[4].note.startswith("12 hedged")
    assert rows[-1].requests == 100
    assert rows[-1].note == "3 error, 97 ok; 7 hedge copies cancelled; 1 NOT ACCOUNTED FOR"


def test_summary_json_carries_the_rows_only_for_a_fleet_run_and_reads_them_back():
    rows = (PolicyRow(policy="canary", part="canary", requests=10, share=0.1, replicas=1, note="weights: 10%"),)
    written = Summary(policies=rows).to_dict()
    assert written["policies"][0]["part"] == "canary" and "policies" not in Summary().to_dict()
    assert Summary.from_dict(written).policies == rows
