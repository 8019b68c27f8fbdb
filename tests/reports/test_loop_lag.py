"""The load generator's loop lag in the report: next to the latencies, in the health table, and a warning."""

from reports.report import ReportOptions, write_report
from reports.bench.synthetic import write_synthetic_run
from contract.loadgen_meta import update_meta


def test_loop_lag_is_shown_per_level_and_a_limited_level_is_warned_about(tmp_path):
    run = write_synthetic_run(tmp_path / "run", records=400, strategies=("continuous",), concurrencies=(1, 4))
    records = run / "requests.jsonl"
    update_meta(records, "continuous/c=1", {"processes": {}, "limited_by_loadgen": False, "warnings": [],
                                            "loop_lag_p50_s": 0.0001, "loop_lag_p99_s": 0.0004, "loop_lag_max_s": 0.002})
    update_meta(records, "continuous/c=4", {"processes": {}, "limited_by_loadgen": True,
                                            "warnings": ["w0: event-loop lag p99 3.20 ms > 1 ms"],
                                            "loop_lag_p50_s": 0.0002, "loop_lag_p99_s": 0.0032, "loop_lag_max_s": 0.04})
    result = write_report(run, ReportOptions(figures=False))
    by_level = {lvl["level"]: lvl["loadgen"] for lvl in result.summary["levels"]}
    assert by_level["continuous/c=1"]["loop_lag_p99_ms"] == 0.4 and not by_level["continuous/c=1"]["limited_by_loadgen"]
    assert by_level["continuous/c=4"]["loop_lag_max_ms"] == 40.0
    markdown = result.markdown_path.read_text()
    assert "| loop lag p99 (ms)" in markdown or "loop lag p99 (ms) |" in markdown
    assert "0.10 / 0.40 / 2.00" in markdown and "0.20 / 3.20 / 40.00" in markdown   # p50 / p99 / max
    warnings = markdown.split("## Warnings", 1)[1]   # grouped under the load generator's kind, with its fix
    assert "**Load generator limits**" in warnings and "--loadgen-processes N" in warnings
    assert ("- the load generator, not the server, was a limit at: continuous/c=4; "
            "its event-loop lag p99 bounds its timing error there: continuous/c=4 (3.20 ms)") in warnings
