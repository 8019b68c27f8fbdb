"""`servecap sweep --auto` and the report's verdict judge levels by the same rule, so they name the same knee.

The same records go to the sweep's search (servecap.experiment.profiles.KneeSearch over level_stats) and, written
to a run directory, to the report (reports.report.build_summary). The levels are built to sit on
the rule's edges: 0.5% errors (within the 1% allowance), `incomplete` requests (neither ok nor an
error; unbounded in every p99: one of 201 stays below the top 1%, three of 203 reach it), and p99s
a hair either side of the limit.
"""

import json

import numpy as np
import pytest

from servecap.experiment.level_stats import level_stats
from servecap.experiment.profiles import KneeSearch, drive
from reports.report import ReportOptions, build_summary
from reports.run_data import load_run
from reports.summary import slo_samples
from reports.verdict import max_sustainable
from contract.records import Record, RecordWriter
from contract.slo import SLO

SLO_UNDER_TEST = SLO(ttft_ms=100, tpot_ms=50)
N = 200                 # measure-phase requests per level
TOP = 5                 # this many slowest TTFTs are set to the level's p99 (so the p99 is exactly that)
P99_TTFT_S = {1: 0.040, 2: 0.060, 4: 0.080, 5: 0.090, 6: 0.0999, 7: 0.1001, 8: 0.090}  # 7: just over 100 ms
ERRORS = {2: 1}         # 1 of 200 = 0.5% errors: meets the SLO
INCOMPLETE = {4: 1, 8: 3}   # in flight when the level stopped: not errors; 8 misses by them alone


def _level_records(concurrency: int) -> list[dict]:
    rng = np.random.default_rng(concurrency)
    level, out = f"continuous/c={concurrency}", []
    ttft = rng.uniform(0.005, P99_TTFT_S[concurrency] * 0.8, N)
    ttft[np.argsort(ttft)[-TOP:]] = P99_TTFT_S[concurrency]
    for i in range(N + 10):
        measure = i >= 10
        value = float(ttft[i - 10]) if measure else 5.0   # slow warm-up requests must not count
        tokens = int(rng.integers(2, 20))
        status = "http_503" if measure and i - 10 < ERRORS.get(concurrency, 0) else "ok"
        out.append(Record(level=level, phase="measure" if measure else "warmup", t_start=1000.0 + i * 0.05,
                          ttft_s=value if status == "ok" else None, e2e_s=value + 0.01 * (tokens - 1),
                          itl_s=[0.01] * (tokens - 1) if status == "ok" else [], prompt_tokens=32,
                          output_tokens=tokens if status == "ok" else None, status=status,
                          worker="w", response_id=f"{level}#{i}").to_dict())
    for i in range(INCOMPLETE.get(concurrency, 0)):
        out.append({**out[-1], "status": "incomplete", "ttft_s": 0.5, "e2e_s": 9.0, "response_id": f"x{i}"})
    return out


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """(what the sweep found, the levels it ran, the report's summary of those levels)."""
    tried: dict[int, list[dict]] = {}

    def measure(level):  # what the runner measures at a level: its quick figures
        concurrency = int(level.load)
        tried[concurrency] = _level_records(concurrency)
        records = [Record.from_dict(r) for r in tried[concurrency]]
        return level_stats(records, f"continuous/c={concurrency}")

    found = drive(KneeSearch(SLO_UNDER_TEST, max_concurrency=256).steps(), measure)
    run_dir = tmp_path_factory.mktemp("agree")
    with RecordWriter(run_dir / "requests.jsonl") as writer:
        for concurrency in sorted(tried):
            writer.write_many(tried[concurrency])
    (run_dir / "run.json").write_text(json.dumps({"slo": SLO_UNDER_TEST.to_dict(), "server": {"model": "tiny"}}))
    data = load_run(run_dir)
    return found, tried, build_summary(data, ReportOptions()), slo_samples(data)


def test_the_search_tried_the_edge_cases(judged):
    found, tried, _, _ = judged
    assert sorted(tried) == [1, 2, 4, 6, 7, 8]          # ramp 1, 2, 4, 8; bisect 6, then 7
    assert (found.max_meeting_slo, found.first_failing) == (6, 7)
    stats = level_stats([Record.from_dict(r) for r in tried[2]], "continuous/c=2")
    assert (stats.requests, stats.errors, stats.error_rate) == (N, 1, 0.005)
    stats = level_stats([Record.from_dict(r) for r in tried[4]], "continuous/c=4")
    assert (stats.requests, stats.errors, stats.incomplete) == (N, 0, 1) and stats.check(SLO_UNDER_TEST).meets
    stats = level_stats([Record.from_dict(r) for r in tried[8]], "continuous/c=8")
    assert stats.p99_ttft_s == 0.090 and stats.check(SLO_UNDER_TEST).reason == (
        "ttft_s p99 unbounded > 100.0 ms: 3 of 203 requests never finished")


def test_sweep_and_report_agree_on_the_knee(judged):
    found, _, summary, _ = judged
    rows = {row.slo: row for row in summary.verdict.max_sustainable}
    for name in ("all", "ttft_s"):
        assert rows[name].level == f"continuous/c={found.max_meeting_slo}"
        assert rows[name].first_failing_level == f"continuous/c={found.first_failing}"
    assert rows["all"].failing_reason == "ttft_s p99 100.1 ms > 100.0 ms"
    # TPOT alone fails only where the unfinished requests make every p99 unbounded
    assert (rows["tpot_s"].level, rows["tpot_s"].first_failing_level) == ("continuous/c=7", "continuous/c=8")
    assert rows["tpot_s"].failing_reason.startswith("tpot_s p99 unbounded")


def test_sweep_and_report_agree_level_by_level(judged):
    _, tried, summary, samples = judged
    for concurrency, rows in tried.items():
        level = f"continuous/c={concurrency}"
        stats = level_stats([Record.from_dict(r) for r in rows], level)
        reported = summary.level(level)
        assert stats.error_rate == reported.error_rate
        assert stats.p99_ttft_s == reported.metrics["ttft_s"].p99 == P99_TTFT_S[concurrency]
        assert stats.p99_tpot_s == reported.metrics["tpot_s"].p99
        assert stats.p99_e2e_s == reported.metrics["e2e_s"].p99
        [alone] = [row for row in max_sustainable([reported], SLO_UNDER_TEST, samples) if row.slo == "all"]
        assert stats.check(SLO_UNDER_TEST).meets is (alone.level == level), level
