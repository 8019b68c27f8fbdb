"""The load generator's loop lag in the report: next to the latencies, in the health table, and a warning
only where it is wider than the confidence interval of a percentile it could move."""

import pytest

from contract.loadgen_meta import update_meta
from lab.reports.synthetic import write_synthetic_run
from reports.report import ReportOptions, write_report
from contract.level_result import Distribution
from reports.summary import lag_limited


def test_the_lag_limits_only_the_percentiles_whose_interval_is_narrower_than_it():
    metrics = {"ttft_s": Distribution(p50_ci95=(0.0100, 0.0105), p95_ci95=(0.012, 0.020), p99_ci95=(0.015, 0.040)),
               "tpot_s": Distribution(p50_ci95=(0.0020, 0.0021)),      # TPOT is not judged: the lag over its tokens
               "itl_s": Distribution(p50_ci95=None),
               "e2e_s": Distribution(p50_ci95=(0.1000, 0.1009), p99_ci95=(0.2, 0.3))}
    limited = lag_limited(metrics, 1.0, 1.0)
    assert [(row.metric, row.q) for row in limited] == [("ttft_s", "p50"), ("e2e_s", "p50")]
    assert [row.ci_ms for row in limited] == pytest.approx([0.5, 0.9])
    assert lag_limited(metrics, 0.4, 0.4) == ()      # narrower than every interval: the sample's noise dominates
    # the median reading carries the lag's median, a tail reading the lag's p99
    assert [(r.metric, r.q) for r in lag_limited(metrics, 0.1, 10.0)] == [("ttft_s", "p95")]
    assert lag_limited(metrics, None, None) == ()     # no probe ran (an old run, or not a Locust one)


def test_loop_lag_is_shown_per_level_and_warned_about_where_it_outweighs_the_interval(tmp_path):
    run = write_synthetic_run(tmp_path / "run", records=400, strategies=("continuous",), concurrencies=(1, 4))
    records = run / "requests.jsonl"
    update_meta(records, "continuous/c=1", {"processes": {}, "limited_by_loadgen": False, "warnings": [],
                                            "loop_lag_p50_s": 0.000001, "loop_lag_p99_s": 0.00001, "loop_lag_max_s": 0.002})   # quiet
    update_meta(records, "continuous/c=4", {"processes": {}, "limited_by_loadgen": False, "warnings": [],
                                            "loop_lag_p50_s": 0.0002, "loop_lag_p99_s": 0.5, "loop_lag_max_s": 0.9})
    result = write_report(run, ReportOptions(figures=False))
    by_level = {lvl.level: lvl.loadgen for lvl in result.summary.levels}
    assert by_level["continuous/c=1"].loop_lag_p99_ms == 0.01 and by_level["continuous/c=1"].lag_limited == ()
    assert by_level["continuous/c=4"].loop_lag_max_ms == 900.0
    # a 500 ms tail lag is wider than every tail interval; its 0.2 ms median lag is not, except where the
    # interval of a median is narrower still
    tails = [(r.metric, r.q) for r in by_level["continuous/c=4"].lag_limited if r.q != "p50"]
    assert tails == [(m, q) for m in ("ttft_s", "itl_s", "e2e_s") for q in ("p95", "p99")]
    markdown = result.markdown_path.read_text()
    assert "| loop lag p50/p99/max (ms)" in markdown or "loop lag p50/p99/max (ms) |" in markdown
    assert "0.00 / 0.01 / 2.00" in markdown and "0.20 / 500.00 / 900.00" in markdown   # p50 / p99 / max
    warnings = markdown.split("## Warnings", 1)[1]   # grouped under the load generator's kind, with its fix
    assert "**Load generator limits**" in warnings and "--loadgen-processes N" in warnings
    assert ("its timing error (event-loop lag) was wider than the percentile's 95% confidence interval at: "
            "continuous/c=4 (TTFT p95: lag 500.00 ms, CI ") in warnings
    assert "continuous/c=1 (lag" not in warnings
