"""summary.json from a real report: written from the typed Summary, read back into it unchanged, and an
older file (without the keys added since) still read, rendered and gated."""

import json
from dataclasses import fields

import pytest

from contract.level_result import LevelResult
from contract.slo import SLO
from contract.summary import Summary
from lab.reports.synthetic import write_synthetic_run
from reports.gate.inputs import summary_value
from reports.page import tables
from reports.page.render import sections, to_markdown
from reports.report import ReportOptions, build_summary
from reports.run_data import load_run
from reports.side_by_side import side_by_side

# keys summary.json gained after its first shape: an old file lacks them
NEWER_LEVEL_KEYS = ("windows", "incomplete", "reasoning_tokens_mean", "host_steal", "client_vs_server",
                    "server_latency", "predicted", "by_model", "lora_slot_waits", "by_turn")
NEWER_SUMMARY_KEYS = ("validation", "machine_drift_levels", "unstable_levels", "diagnostics", "quality")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    run = write_synthetic_run(tmp_path_factory.mktemp("json") / "run", records=600, strategies=("none", "continuous"),
                              concurrencies=(1, 2, 4))
    return run, build_summary(load_run(run), ReportOptions(slo=SLO(ttft_ms=200, tpot_ms=30), replications=2))


def test_a_reports_summary_round_trips_through_its_json(report):
    _, summary = report
    document = summary.to_dict()
    text = json.dumps(document, indent=1, allow_nan=False)
    back = Summary.from_dict(json.loads(text))
    assert back.to_dict() == document and json.dumps(back.to_dict(), indent=1) == text   # the keys' order too
    assert Summary.from_dict(back.to_dict()) == back
    assert list(document) == ["run", "levels", "validation", "verdict", "missing", "loadgen_warnings",
                              "unstable_levels", "machine_drift_levels", "diagnostics", "metrics", "quality"]
    # every field of a level is one key of its object, in the same order
    assert list(document["levels"][0]) == [f.name for f in fields(LevelResult) if f.name != "extra"]
    assert [lvl.level for lvl in back.levels] == [lvl["level"] for lvl in document["levels"]] == \
        ["none/c=1", "none/c=2", "none/c=4", "continuous/c=1", "continuous/c=2", "continuous/c=4"]
    for built, read, written in zip(summary.levels, back.levels, document["levels"]):
        assert read.metrics["ttft_s"].p99 == built.metrics["ttft_s"].p99 == written["metrics"]["ttft_s"]["p99"] > 0
        assert read.metrics["itl_s"].p99_ci95 == tuple(written["metrics"]["itl_s"]["p99_ci95"])
        assert read.offered.value == written["offered"]["concurrency"] and read.strategy == written["strategy"]
        assert read.output_tokens_per_s == pytest.approx(written["output_tokens"] / written["duration_s"])
        step = read.predicted.comparisons["step_s"]
        assert step.measured == written["predicted"]["comparisons"]["step_s"]["measured"]
    assert back.verdict.slo.ttft_ms == 200 and document["verdict"]["slo"]["ttft_ms"] == 200
    assert [(row.strategy, row.slo, row.level) for row in back.verdict.max_sustainable] == \
        [(row["strategy"], row["slo"], row["level"]) for row in document["verdict"]["max_sustainable"]]
    assert back.validation.predictions.keys() == document["validation"]["predictions"].keys()


def test_a_side_by_side_summary_round_trips_in_its_own_shape(report, tmp_path):
    run, _ = report
    other = write_synthetic_run(tmp_path / "other", records=300, strategies=("continuous",), concurrencies=(1, 4))
    result = side_by_side([run, other], tmp_path / "both", ReportOptions(figures=False, slo=SLO(ttft_ms=200)))
    document = json.loads(result.summary_path.read_text())
    assert Summary.from_dict(document).to_dict() == document
    assert result.summary.side_by_side and result.summary.validation is None
    assert list(document)[:5] == ["run", "levels", "verdict", "metrics", "speculation_crossover"]
    assert [lvl.strategy for lvl in result.summary.levels] == ["A: none"] * 3 + ["A: continuous"] * 3 + \
        ["B: continuous"] * 2


def test_an_older_summary_without_the_newer_keys_is_read_rendered_and_gated(report):
    _, summary = report
    old = summary.to_dict()
    for key in NEWER_SUMMARY_KEYS:
        del old[key]
    del old["verdict"]["slo"]["ttfa_ms"]
    for level in old["levels"]:
        for key in NEWER_LEVEL_KEYS:
            del level[key]
        del level["metrics"]["ttfa_s"], level["metrics"]["queue_s"], level["metrics"]["e2e_with_queue_s"]
        del level["loadgen"]["lag_limited"]
    problems = []
    read = Summary.from_dict(json.loads(json.dumps(old)), problems)
    assert problems == []
    level = read.levels[-1]
    assert level.level == "continuous/c=4" and level.spans == (tuple(old["levels"][-1]["window"]),)
    assert level.metric("ttfa_s").count == 0 and level.predicted is None and level.client_vs_server is None
    assert read.validation is None and read.unstable_levels == () and read.verdict.slo.ttfa_ms is None
    # the gate reads it, and the report's pages render from it
    assert summary_value(level, "ttft_s", "p99") == (old["levels"][-1]["metrics"]["ttft_s"]["p99"],
                                                     tuple(old["levels"][-1]["metrics"]["ttft_s"]["p99_ci95"]))
    assert summary_value(level, "output_tokens_per_s")[0] == old["levels"][-1]["output_tokens_per_s"]
    assert summary_value(level, "cpu_s_per_token") == (None, None)   # compare's: never in a summary
    markdown = to_markdown("old", sections(read, []))
    assert "continuous/c=4" in markdown and "Latency detail: e2e_s" in markdown
    assert tables.latency_table(read, "ttfa_s").empty and len(tables.latency_table(read, "ttft_s")) == 6
