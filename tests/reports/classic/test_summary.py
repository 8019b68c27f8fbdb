"""reports.classic.summary: a classic model's levels judged by the contract's SLO rule, the best one named."""

import json

import pytest

from contract.records import Record, RecordWriter
from contract.slo import SLO
from reports.classic.summary import best_level, classic_levels
from reports.run_data import load_run

# level: (seconds between sends, E2E, failed, still in flight at the end)
LEVELS = {"classifier/c=1": (0.010, 0.004, 0, 0),
          "classifier/c=4": (0.005, 0.006, 1, 0),     # 1 of 101 failed: within the 1% allowance
          "classifier/c=8": (0.0025, 0.008, 0, 2),    # 2 of 102 never answered: the p99 is unbounded
          "classifier/c=16": (0.002, 0.012, 0, 0)}    # over the 10 ms limit


@pytest.fixture
def levels(tmp_path):
    rows = []
    for level, (gap, e2e, failed, stuck) in LEVELS.items():
        for i in range(100 + failed + stuck):
            status = "ok" if i < 100 else "http_503" if i < 100 + failed else "incomplete"
            rows.append(Record(level=level, phase="measure", t_start=1000.0 + i * gap, status=status,
                               e2e_s=e2e if status == "ok" else None, prompt_tokens=2, api="classify").to_dict())
    with RecordWriter(tmp_path / "requests.jsonl") as writer:
        writer.write_many(rows)
    (tmp_path / "run.json").write_text(json.dumps({"server": {"model": "tiny"}, "workload": {"api": "classify"}}))
    return {lv["level"]: lv for lv in classic_levels(load_run(tmp_path), SLO(e2e_ms=10))}


def test_each_level_is_judged_by_the_contracts_rule(levels):
    assert {name: (lv["meets_slo"], lv["why_not"]) for name, lv in levels.items()} == {
        "classifier/c=1": (True, None),
        "classifier/c=4": (True, None),
        "classifier/c=8": (False, "e2e_s p99 unbounded > 10.0 ms: 2 of 102 requests never finished"),
        "classifier/c=16": (False, "e2e_s p99 12.0 ms > 10.0 ms"),
    }


def test_the_best_level_is_the_fastest_that_meets_it_one_error_in_a_hundred_allowed(levels):
    assert levels["classifier/c=4"]["req_per_s"] > levels["classifier/c=1"]["req_per_s"]
    assert best_level(list(levels.values()))["level"] == "classifier/c=4"
    assert best_level([levels["classifier/c=8"], levels["classifier/c=16"]]) is None
