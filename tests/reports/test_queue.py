"""Coordinated omission in the report: E2E from the intended send time (queue_s added) beside plain E2E."""

import json

import numpy as np
import pytest

from reports.report import ReportOptions, write_report
from lab.reports.synthetic import write_synthetic_run


def test_e2e_with_queue_is_e2e_plus_queue_s_and_shown_beside_e2e(tmp_path):
    run = write_synthetic_run(tmp_path / "run", records=600, strategies=("continuous",), concurrencies=(1, 4))
    path = run / "requests.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for i, row in enumerate(rows):
        if row["level"] == "continuous/c=4":
            row["queue_s"] = 0.05 * (i % 4)   # a cap held some requests back
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = write_report(run, ReportOptions(figures=False))
    by_level = {lvl.level: lvl for lvl in result.summary.levels}
    ok = [r for r in rows if r["level"] == "continuous/c=4" and r["phase"] == "measure" and r["status"] == "ok"]
    queued = by_level["continuous/c=4"].metrics
    assert queued["e2e_with_queue_s"].p99 == pytest.approx(np.percentile([r["e2e_s"] + r["queue_s"] for r in ok], 99))
    assert queued["queue_s"].p50 == pytest.approx(np.percentile([r["queue_s"] for r in ok], 50))
    assert queued["e2e_with_queue_s"].p99 > queued["e2e_s"].p99
    plain = by_level["continuous/c=1"].metrics
    assert plain["e2e_with_queue_s"].count == 0 and plain["queue_s"].p99 is None   # no queue_s recorded
    markdown = (run / "report.md").read_text()
    assert "E2E incl. queue p50/p99 (ms)" in markdown and "Latency detail: e2e_with_queue_s" in markdown
