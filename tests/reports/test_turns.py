"""Multi-turn runs in the report: the metrics broken down by turn."""

import json

import numpy as np
import pytest

from reports.report import ReportOptions, write_report
from lab.reports.synthetic import write_synthetic_run


def test_levels_with_turns_break_latency_down_by_turn(tmp_path):
    run = write_synthetic_run(tmp_path / "run", records=600, strategies=("continuous",), concurrencies=(2, 4))
    path = run / "requests.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for i, row in enumerate(rows):
        if row["level"] == "continuous/c=2":
            row["conversation_id"], row["turn"] = f"w/c{i // 3}", i % 3 + 1
            row["prompt_tokens"] = 100 * row["turn"]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = write_report(run, ReportOptions(figures=False))
    by_level = {lvl.level: lvl for lvl in result.summary.levels}
    turns = by_level["continuous/c=2"].by_turn
    assert set(turns) == {"1", "2", "3"} and by_level["continuous/c=4"].by_turn is None
    ok = [r for r in rows if r["level"] == "continuous/c=2" and r["phase"] == "measure" and r["status"] == "ok"]
    second = [r for r in ok if r["turn"] == 2]
    assert turns["2"].requests == len(second) and turns["2"].prompt_tokens_mean == 200
    assert turns["2"].ttft_s.p99 == pytest.approx(np.percentile([r["ttft_s"] for r in second], 99))
    markdown = (run / "report.md").read_text()
    assert "## Latency by turn" in markdown and "TTFT p50/p99 (ms)" in markdown
