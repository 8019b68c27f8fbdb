"""One set of requests, one verdict: the sweep's level check, the report's verdict, tune's level, and a
plan/fleet window all hand the same requests to contract.slo.judge and come back with the same answer.

The requests are one load level's measure phase, written as records (the sweep's, the report's and
tune's input) and, sent at their scheduled times, read as a fleet run (`servecap fleet`'s
records_as_run, judged per window by calculators.plan.outcome as the plan judges its own windows).
Each case sits on one edge of the rule.
"""

import json
import math

import numpy as np
import pytest

from calculators.plan.outcome import PlanSlo, outcome
from contract.level_result import LevelResult
from contract.records import Record, RecordWriter
from contract.slo import SLO, SloSample, judge
from reports.run_data import load_run
from reports.summary import slo_samples
from reports.verdict import max_sustainable
from servecap.fleet.replay_records import records_as_run
from servecap.experiment.level_stats import level_stats
from servecap.tune.measure import measure_level
from sweep_helpers import experiment

LEVEL = "continuous/c=4"
SLO_UNDER_TEST = SLO(ttft_ms=100, tpot_ms=50, ttfa_ms=900)


def _records(ok=100, failed=0, unfinished=0, slowest_ttft=0.08, slowest_ttfa=0.5) -> list[dict]:
    rng = np.random.default_rng(ok + failed + unfinished)
    out = []
    for i in range(ok + failed + unfinished):
        t = 10.0 + i * 0.05
        status = "ok" if i < ok else "http_503" if i < ok + failed else "incomplete"
        slowest = i >= ok - 2    # the two slowest: 100 values put the p99 between them, so it is theirs
        ttft = slowest_ttft if slowest else float(rng.uniform(0.01, 0.06))
        tokens = int(rng.integers(2, 30))
        answered = status == "ok"
        out.append(Record(level=LEVEL, phase="measure", t_sched=t, t_start=t, status=status,
                          ttft_s=ttft if answered else None, e2e_s=ttft + 0.02 * (tokens - 1) if answered else None,
                          ttfa_s=(slowest_ttfa if slowest else ttft + 0.1) if answered else None,
                          output_tokens=tokens if answered else None, response_id=f"r{i}").to_dict())
    return out


def _chat_experiment():
    from dataclasses import replace

    return replace(experiment("--concurrency", "4"), slo=SLO_UNDER_TEST)


CASES = {
    "meets": _records(),
    "1% failed: meets": _records(ok=99, failed=1),
    "2% failed": _records(ok=98, failed=2),
    "1 unfinished of 101: below the top 1%": _records(ok=100, unfinished=1),
    "2 unfinished of 102: in the top 1%": _records(ok=100, unfinished=2),
    "TTFT p99 over": _records(slowest_ttft=0.5),
    "TTFA p99 over": _records(slowest_ttfa=1.5),
}
EXPECTED = {
    "meets": "",
    "1% failed: meets": "",
    "2% failed": "error rate 2.0% > 1%",
    "1 unfinished of 101: below the top 1%": "",
    "2 unfinished of 102: in the top 1%": "ttft_s p99 unbounded > 100.0 ms: 2 of 102 requests never finished",
    "TTFT p99 over": "ttft_s p99 500.0 ms > 100.0 ms",
    "TTFA p99 over": "ttfa_s p99 1500.0 ms > 900.0 ms",
}


def _report(tmp_path, rows: list[dict]):
    """The report's verdict on the level: (its reason, the judge's p99s from the run directory)."""
    with RecordWriter(tmp_path / "requests.jsonl") as writer:
        writer.write_many(rows)
    (tmp_path / "run.json").write_text(json.dumps({"slo": SLO_UNDER_TEST.to_dict(), "server": {"model": "tiny"}}))
    sample = slo_samples(load_run(tmp_path))[LEVEL]
    level = LevelResult.from_dict({
        "level": LEVEL, "strategy": "continuous", "offered": {"concurrency": 4}, "output_tokens_per_s": 1.0,
        "request_rate_rps": 1.0, "metrics": {c: {"p99": None, "p99_ci95": None} for c in ("ttft_s", "tpot_s",
                                                                                          "e2e_s", "ttfa_s")}})
    [row] = [r for r in max_sustainable([level], SLO_UNDER_TEST, {LEVEL: sample}) if r.slo == "all"]
    return row.failing_reason or "", judge(SLO_UNDER_TEST, sample).p99_s


def _fleet_window(rows: list[dict]):
    """The requests as a real fleet's run, judged as one plan window: (its reason, its p99s)."""
    run = records_as_run(rows, 0.0, [], [], 20.0, {})
    window, = outcome(run, PlanSlo(SLO_UNDER_TEST, attainment=1.0), window_s=3600.0).windows
    return window.why_not, window.p99


@pytest.mark.parametrize("case", CASES)
def test_every_caller_gives_the_same_verdict_for_the_same_requests(case, tmp_path):
    rows = CASES[case]
    records = [Record.from_dict(r) for r in rows]
    direct = judge(SLO_UNDER_TEST, SloSample.from_records(records))
    sweep = level_stats(records, LEVEL).check(SLO_UNDER_TEST)
    tune = measure_level(level_stats(records, LEVEL), LEVEL, _chat_experiment())
    report_reason, report_p99 = _report(tmp_path, rows)
    fleet_reason, fleet_p99 = _fleet_window(rows)
    assert direct.reason == EXPECTED[case]
    assert sweep.reason == (tune.reason or "") == report_reason == fleet_reason == direct.reason
    assert sweep.meets is tune.meets is (direct.reason == "")
    for column in ("ttft_s", "tpot_s", "e2e_s"):
        want = direct.p99_s[column]
        assert sweep.p99_s[column] == report_p99[column] == want
        # the fleet's clock re-derives each latency from send and end times: equal to rounding
        assert fleet_p99[column] == pytest.approx(want, rel=1e-9) or math.isinf(want) and math.isinf(fleet_p99[column])


def test_a_compare_runs_requests_cut_off_at_a_switch_are_in_no_set(tmp_path):
    rows = CASES["meets"] + [{**CASES["2 unfinished of 102: in the top 1%"][-1], "switch": "excluded",
                              "response_id": f"cut{i}"} for i in range(5)]
    records = [Record.from_dict(r) for r in rows]
    direct = judge(SLO_UNDER_TEST, SloSample.from_records(records))
    report_reason, _ = _report(tmp_path, rows)
    assert direct.meets and report_reason == "" and level_stats(records, LEVEL).check(SLO_UNDER_TEST).meets
    assert SloSample.from_records(records).requests == 100


def test_a_hedges_cancelled_copies_are_neither_requests_nor_errors(tmp_path):
    # --hedge-after: each loser is recorded "cancelled"; the sweep's live figures, the judge and the report
    # count the users' requests (the kept copies) alone
    rows = CASES["meets"] + [{**CASES["meets"][i], "status": "cancelled", "hedge": "copy", "ttft_s": None,
                              "e2e_s": None, "ttfa_s": None, "response_id": f"loser{i}"} for i in range(5)]
    records = [Record.from_dict(r) for r in rows]
    stats = level_stats(records, LEVEL)
    assert (stats.requests, stats.errors, stats.incomplete) == (100, 0, 0)
    assert stats.check(SLO_UNDER_TEST).meets and SloSample.from_records(records).requests == 100
    assert _report(tmp_path, rows)[0] == ""
