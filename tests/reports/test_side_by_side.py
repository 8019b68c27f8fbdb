"""`servecap report RUN_A RUN_B --out DIR` and `servecap report COMPARE_DIR`: runs (or arms) on shared axes."""

import json

import pytest

from compare_dirs import write_compare_dir
from lab.reports.synthetic import write_synthetic_run
from servecap.cli import main as servecap_main


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    a = write_synthetic_run(base / "main", records=2000, strategies=("continuous",), concurrencies=(1, 4, 8, 16))
    b = write_synthetic_run(base / "pr", records=2000, strategies=("none", "continuous"), concurrencies=(1, 4, 8, 16),
                            seed=1)
    out = base / "side"
    assert servecap_main(["report", str(a), str(b), "--out", str(out), "--slo-ttft-ms", "100"]) == 0
    return a, b, out


def test_both_runs_share_the_axes_and_the_answer(two_runs):
    a, b, out = two_runs
    summary = json.loads((out / "summary.json").read_text())
    strategies = {lvl["strategy"] for lvl in summary["levels"]}
    assert strategies == {"A: continuous", "B: none", "B: continuous"}
    assert {lvl["level"] for lvl in summary["levels"]} >= {"A: continuous/c=1", "B: none/c=16"}
    markdown = (out / "report.md").read_text()
    assert markdown.startswith("# servecap report: main vs pr\n\n## Answer\n\nRuns compared: **A** = `main` "
                               "(tiny on NVIDIA H100 80GB HBM3); **B** = `pr` (tiny on NVIDIA H100 80GB HBM3).")
    answer = markdown.split("\n")[6]
    assert " sustains **" in answer and "what B: none sustains" in answer
    for name in ("throughput_vs_latency.png", "latency_ttft_s.png", "latency_e2e_s.png", "goodput_vs_load.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG" and f"]({name})" in markdown
    assert markdown.index("](throughput_vs_latency.png)") < markdown.index("| strategy ")
    # nothing is written into the runs themselves
    assert not (a / "report.html").exists() and not (b / "summary.json").exists()


def test_a_compare_directory_gets_its_arms_side_by_side(tmp_path):
    run = write_compare_dir(tmp_path / "cmp", pairs=6, effect=0.3)
    assert servecap_main(["report", str(run), "--slo-tpot-ms", "50", "--no-figures"]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert [lvl["level"] for lvl in summary["levels"]] == ["A: a/c=4", "B: b/c=4"]
    rows = {lvl["strategy"]: lvl for lvl in summary["levels"]}
    assert rows["B"]["metrics"]["tpot_s"]["p50"] > 1.2 * rows["A"]["metrics"]["tpot_s"]["p50"]   # B is 30% slower
    markdown = (run / "report.md").read_text()
    assert "## Answer" in markdown and "Runs compared: **A** = " in markdown


def test_two_runs_need_out_and_one_run_takes_none(tmp_path, capsys):
    run = write_synthetic_run(tmp_path / "r", records=200, strategies=("continuous",), concurrencies=(1, 2))
    assert servecap_main(["report", str(run), str(run)]) == 2
    assert "two runs need --out DIR" in capsys.readouterr().err
    assert servecap_main(["report", str(run), "--out", str(tmp_path / "x")]) == 2
    assert "--out is for two or more runs" in capsys.readouterr().err
    assert servecap_main(["report", str(run), str(tmp_path / "nope"), "--out", str(tmp_path / "x")]) == 2
    assert "does not exist" in capsys.readouterr().err
