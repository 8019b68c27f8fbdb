"""`servecap report RUN_DIR` on run directories written here exactly as DESIGN.md's schema says.

Summary numbers are recomputed in the test from the records with plain Python
and numpy, never with reports' own helpers.
"""

import json
import math
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from calculators.kv import kv_block_bytes
from engine_core.models import get_model
from contract.slo import SLO
from reports.report import ReportOptions, write_report
from servecap.cli import main as servecap_main
from contract.loadgen_meta import update_meta
from contract.slo import SLO

T0 = 1_800_000_000.0
LEVELS = ("none/c=1", "none/c=4", "continuous/c=1", "continuous/c=4", "continuous/rps=8.0")
IN_FLIGHT = "continuous/rps=8.0"   # the level whose last 2 requests were still in flight when it stopped
RUNNING = {"none/c=1": 1, "none/c=4": 1, "continuous/c=1": 1, "continuous/c=4": 4, "continuous/rps=8.0": 3}


def _records(rng, level: str, start: float) -> list[dict]:
    """60 measure + 5 warm-up records; 3 errors at none/c=4 only; open-loop levels get t_sched; 2 more
    still in flight at IN_FLIGHT."""
    out, t = [], start
    for i in range(65):
        tokens = int(rng.integers(1, 9))
        ttft = 0.18 if i == 30 else float(rng.uniform(0.01, 0.1))  # one TTFT SLO miss per level
        gaps = [float(g) for g in rng.uniform(0.002, 0.02, tokens - 1)]
        status = "http_503" if i % 20 == 7 and level == "none/c=4" else "ok"
        t_sched = t if "rps=" in level else None
        t_start = t + (float(rng.uniform(0, 0.004)) if t_sched else 0.0)
        out.append({
            "level": level, "phase": "warmup" if i < 5 else "measure", "t_sched": t_sched, "t_start": t_start,
            "ttft_s": ttft if status == "ok" else None, "e2e_s": ttft + sum(gaps),
            "itl_s": gaps if status == "ok" else [], "prompt_tokens": 32,
            "output_tokens": tokens if status == "ok" else 0, "status": status,
            "error": None if status == "ok" else "overloaded", "worker": f"w{i % 2}",
            "response_id": f"cmpl-{i}",
        })
        t += 0.1
    for i in range(2 if level == IN_FLIGHT else 0):  # in flight when the level stopped: neither ok nor an error
        out.append({**out[-1], "status": "incomplete", "ttft_s": 0.01, "e2e_s": 0.3, "itl_s": [0.1, 0.1],
                    "output_tokens": 3, "response_id": f"cmpl-x{i}"})
    return out


def write_run(run_dir, levels=LEVELS, samples=True, planned=LEVELS, torn=False):
    rng = np.random.default_rng(5)
    run_dir.mkdir(parents=True, exist_ok=True)
    records, windows, start = [], {}, T0
    for level in levels:
        rows = _records(rng, level, start)
        records += rows
        measure = [r for r in rows if r["phase"] == "measure"]
        windows[level] = (min(r["t_start"] for r in measure), max(r["t_start"] + r["e2e_s"] for r in measure))
        start = windows[level][1] + 5.0
    with open(run_dir / "requests.jsonl", "w") as f:
        for row in records:
            f.write(json.dumps(row) + "\n")
        if torn:
            f.write(json.dumps(records[-1])[:40])  # killed mid-write: no newline, half an object
    metrics = []
    batch_sum = batch_count = step_sum = 0.0
    for level in levels:
        lo, hi = windows[level]
        for t in np.arange(lo, hi, 0.5):
            # 10 engine steps per scrape, each 2 ms + 1 ms per running sequence
            batch_sum, batch_count = batch_sum + 10 * RUNNING[level], batch_count + 10
            step_sum += 10 * (0.002 + 0.001 * RUNNING[level])
            metrics += [(t, "servecap_requests_running", "", RUNNING[level]),
                        (t, "servecap_kv_blocks_used", "", 2 * RUNNING[level]),
                        (t, "servecap_kv_blocks_total", "", 64),
                        (t, "servecap_batch_size_sum", "", batch_sum),
                        (t, "servecap_batch_size_count", "", batch_count),
                        (t, "servecap_engine_step_seconds_sum", "", step_sum),
                        (t, "servecap_engine_step_seconds_count", "", batch_count)]
    pd.DataFrame(metrics, columns=["t", "name", "labels", "value"]).to_csv(run_dir / "server_metrics.csv", index=False)
    if samples:
        rows = [(t, "nvml", "0", 50.0, 8e9, 80e9, 200.0, 1500, 50) for t in np.arange(T0 - 1, start, 0.25)]
        pd.DataFrame(rows, columns=["t", "source", "device", "util_pct", "mem_used_bytes", "mem_total_bytes",
                                    "power_w", "sm_clock_mhz", "temp_c"]).to_csv(run_dir / "samples.csv", index=False)
    run = {"server": {"model": "tiny", "dtype": "float32", "block_size": 16, "kv_blocks": 64, "max_num_seqs": 8,
                      "kv_block_bytes": kv_block_bytes(get_model("tiny"), "float32", 16)},
           "levels": [{"level": lvl} for lvl in planned], "host": {"gpus": []}}
    (run_dir / "run.json").write_text(json.dumps(run))
    return records, windows


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run")
    records, windows = write_run(run_dir)
    result = write_report(run_dir, ReportOptions(slo=SLO(ttft_ms=150, tpot_ms=25), gpu_hourly=2.0))
    return run_dir, records, windows, result


def test_summary_matches_an_independent_recomputation(full_run):
    run_dir, records, windows, result = full_run
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [lvl["level"] for lvl in summary["levels"]] == sorted(LEVELS, key=lambda s: (s.split("/")[0] != "none", s))
    for lvl in summary["levels"]:
        measure = [r for r in records if r["level"] == lvl["level"] and r["phase"] == "measure"]
        ok = [r for r in measure if r["status"] == "ok"]
        finished = [r for r in measure if r["status"] != "incomplete"]
        start = min(r["t_start"] for r in measure)
        duration = max(r["t_start"] + r["e2e_s"] for r in measure) - start
        assert lvl["requests"] == len(finished) and lvl["errors"] == len(finished) - len(ok)
        assert lvl["incomplete"] == (2 if lvl["level"] == IN_FLIGHT else 0)
        assert lvl["request_rate_rps"] == pytest.approx(len(ok) / duration)
        assert lvl["output_tokens_per_s"] == pytest.approx(sum(r["output_tokens"] for r in ok) / duration)
        expected = {
            "ttft_s": [r["ttft_s"] for r in ok],
            "e2e_s": [r["e2e_s"] for r in ok],
            "itl_s": [g for r in ok for g in r["itl_s"]],
            "tpot_s": [(r["e2e_s"] - r["ttft_s"]) / (r["output_tokens"] - 1) for r in ok if r["output_tokens"] >= 2],
        }
        for metric, values in expected.items():
            got = lvl["metrics"][metric]
            assert got["count"] == len(values)
            for q in (50, 90, 95, 99):
                assert got[f"p{q}"] == pytest.approx(np.percentile(values, q), rel=1e-9)
            assert got["p99_ci95"][0] <= got["p99"] <= got["p99_ci95"][1]
        good = [r for r in ok if r["ttft_s"] <= 0.150 and (r["output_tokens"] < 2 or
                (r["e2e_s"] - r["ttft_s"]) / (r["output_tokens"] - 1) <= 0.025)]
        assert lvl["goodput_rps"] == pytest.approx(len(good) / duration)
        assert len(good) == len(ok) - 1  # the one slow first token per level is not goodput


def test_server_device_and_energy_means_per_level(full_run):
    run_dir, records, windows, result = full_run
    for lvl in result.summary.levels:
        assert lvl.server["requests_running_mean"] == pytest.approx(RUNNING[lvl.level])
        assert lvl.server["kv_usage_mean"] == pytest.approx(2 * RUNNING[lvl.level] / 64)
        assert lvl.server["batch_size_mean"] == pytest.approx(RUNNING[lvl.level])
        assert lvl.device["nvml"]["util_pct"] == pytest.approx(50.0)
        assert lvl.device["nvml"]["power_w"] == pytest.approx(200.0)
        assert lvl.energy_per_output_token_j == pytest.approx(200.0 * lvl.duration_s / lvl.output_tokens)


def test_open_loop_lateness_is_reported(full_run):
    _, records, _, result = full_run
    lvl = result.summary.level("continuous/rps=8.0")
    late_ms = [(r["t_start"] - r["t_sched"]) * 1000 for r in records
               if r["level"] == lvl.level and r["phase"] == "measure"]
    assert lvl.loadgen.lateness_p99_ms == pytest.approx(np.percentile(late_ms, 99))
    assert lvl.loadgen.late is bool(np.percentile(late_ms, 99) > 1.0)


def test_verdict_cost_and_predictions(full_run):
    verdict = full_run[3].summary.verdict
    assert verdict.slo == SLO(ttft_ms=150, tpot_ms=25)
    assert verdict.to_dict()["slo"] == {"ttft_ms": 150, "tpot_ms": 25, "e2e_ms": None, "ttfa_ms": None}
    point = verdict.operating_point
    rows = {(r.strategy, r.slo): r for r in verdict.max_sustainable}
    assert rows[("none", "all")].first_failing_level == "none/c=4"
    assert rows[("none", "all")].failing_reason == "error rate 5.0% > 1%"
    # 2 of 62 never answered: the top 1% of every latency is unbounded, whatever the 60 answered show
    assert rows[("continuous", "all")].first_failing_level == IN_FLIGHT
    assert rows[("continuous", "all")].failing_reason == (
        "ttft_s p99 unbounded > 150.0 ms: 2 of 62 requests never finished")
    assert verdict.cost["usd_per_1m_output_tokens"] == pytest.approx(2.0 * 1e6 / (3600 * point.output_tokens_per_s))
    for level in full_run[3].summary.levels:
        predicted = level.predicted
        assert predicted.step_model.startswith("step time fitted to this run's levels")  # no GPU here
        compared = predicted.comparisons
        assert compared["kv_block_bytes"].relative_error == 0
        # the fit is exact (2 ms + 1 ms per sequence), so the predicted step time is the measured one
        assert compared["step_s"].predicted == pytest.approx(level.server["step_time_mean_s"], rel=1e-6)
        for key in ("ttft_s p50", "ttft_s p99", "tpot_s p50", "e2e_s p99"):
            pair = compared[key]
            metric, q = key.split()
            assert pair.predicted > 0 and pair.measured == level.metrics[metric].at(q)
            assert pair.relative_error == pytest.approx(pair.predicted / pair.measured - 1)
        if level.strategy == "none":
            assert compared["running_sequences_peak"].predicted == 1  # strategy none runs one at a time


def test_html_is_self_contained_and_references_each_figure(full_run):
    run_dir, _, _, result = full_run
    html = result.html_path.read_text()
    names = {fig.name for fig in result.figures}
    assert names >= {"latency_ttft_s.png", "latency_tpot_s.png", "latency_itl_s.png", "latency_e2e_s.png",
                     "throughput_vs_latency.png", "goodput_vs_load.png", "batch_kv_vs_load.png",
                     "resources_timeseries.png", "latency_cdf.png"}
    for name in names:
        assert (run_dir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f'alt="{name}"' in html and f"]({name})" in result.markdown_path.read_text()
    srcs = re.findall(r'src="([^"]*)"', html)
    assert len(srcs) == len(names) and all(s.startswith("data:image/png;base64,") for s in srcs)
    markdown = result.markdown_path.read_text()
    # the answer first: its sentence, then the throughput-vs-latency figure, then one row per strategy
    assert markdown.index("## Answer") < markdown.index(" sustains **") < markdown.index("](throughput_vs_latency.png)") \
        < markdown.index("| strategy ") < markdown.index("## Levels") < markdown.index("## Figures")
    assert markdown.split("\n")[2] == "## Answer"
    # the per-level and per-SLO tables are collapsed
    levels = markdown[markdown.index("## Levels"):]
    assert levels.index("<details><summary>One row per level") < levels.index("| none/c=1 ")


def test_truncated_run_still_reports_and_names_what_is_missing(tmp_path):
    planned = (*LEVELS, "continuous/c=16")
    records, _ = write_run(tmp_path, levels=LEVELS[:3], samples=False, planned=planned, torn=True)
    assert servecap_main(["report", str(tmp_path), "--slo-ttft-ms", "150"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    missing = "\n".join(summary["missing"])
    assert "torn last line" in missing
    assert "samples.csv is missing" in missing
    for level in ("none/c=4" if "none/c=4" not in LEVELS[:3] else "continuous/c=4", "continuous/c=16"):
        assert f"level {level} is missing" in missing
    assert len(summary["levels"]) == 3
    assert sum(lvl["requests"] + lvl["incomplete"] for lvl in summary["levels"]) == \
        sum(r["phase"] == "measure" for r in records)
    html = (tmp_path / "report.html").read_text()
    assert "torn last line" in html and "samples.csv is missing" in html
    assert not (tmp_path / "resources_timeseries.png").exists()


def test_bad_input_is_a_clear_error_not_a_traceback(tmp_path, capsys):
    assert servecap_main(["report", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert servecap_main(["report", str(tmp_path / "empty")]) == 2
    assert "requests.jsonl is missing" in capsys.readouterr().err
    for content in ("", '{"level": "c=1", "pha'):  # empty, or one torn line and nothing else
        (tmp_path / "empty" / "requests.jsonl").write_text(content)
        assert servecap_main(["report", str(tmp_path / "empty")]) == 2
        assert "holds no complete request record" in capsys.readouterr().err
    write_run(tmp_path / "ok", levels=LEVELS[:1], planned=LEVELS[:1])
    assert servecap_main(["report", str(tmp_path / "ok"), "--slo-ttft-ms", "-3", "--no-figures"]) == 2
    assert "ttft_ms must be a positive" in capsys.readouterr().err


def test_corrupt_line_in_the_middle_is_skipped_and_counted(tmp_path):
    records, _ = write_run(tmp_path, levels=LEVELS[:1], planned=LEVELS[:1])
    lines = (tmp_path / "requests.jsonl").read_text().splitlines()
    lines[10] = lines[10][:25]
    (tmp_path / "requests.jsonl").write_text("\n".join(lines) + "\n")
    result = write_report(tmp_path, ReportOptions(figures=False))
    assert any("1 unreadable line(s) skipped (line 11)" in note for note in result.summary.missing)
    level = result.summary.levels[0]
    assert level.requests + level.incomplete == sum(r["phase"] == "measure" for r in records) - 1
    assert not math.isnan(level.metrics["ttft_s"].p99)


def test_record_order_does_not_change_the_summary(tmp_path):
    write_run(tmp_path / "a", levels=LEVELS[:3], planned=LEVELS[:3])
    write_run(tmp_path / "b", levels=LEVELS[:3], planned=LEVELS[:3])
    lines = (tmp_path / "b" / "requests.jsonl").read_text().splitlines()
    np.random.default_rng(0).shuffle(lines)  # workers finishing out of order, levels interleaved
    (tmp_path / "b" / "requests.jsonl").write_text("\n".join(lines) + "\n")
    a, b = (write_report(tmp_path / name, ReportOptions(figures=False)).summary for name in ("a", "b"))
    for la, lb in zip(a.levels, b.levels):
        assert la.level == lb.level
        for metric in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
            assert la.metrics[metric].count == lb.metrics[metric].count
            assert la.metrics[metric].p99 == pytest.approx(lb.metrics[metric].p99, rel=1e-12)


def test_records_from_other_writers_are_read(tmp_path):
    """Integer worker ids, extra fields and a field the writer never sends: read, noted, summarized."""
    records, _ = write_run(tmp_path, levels=LEVELS[:1], planned=LEVELS[:1])
    with open(tmp_path / "requests.jsonl", "w") as f:
        for i, row in enumerate(records):
            row = {**row, "worker": i % 3, "api": "chat", "request_id": f"r{i}"}
            del row["response_id"], row["error"]
            f.write(json.dumps(row) + "\n")
    result = write_report(tmp_path, ReportOptions(figures=False))
    assert any("lack field(s): error" in note for note in result.summary.missing)
    [level] = result.summary.levels
    assert level.loadgen.workers == 3
    ok = [r for r in records if r["phase"] == "measure" and r["status"] == "ok"]
    assert level.metrics["ttft_s"].p99 == pytest.approx(np.percentile([r["ttft_s"] for r in ok], 99))


def test_degenerate_runs_report_without_warnings(tmp_path):
    """One request, or nothing but failures: every figure and table still renders, warning-free."""
    one = {"level": "c=1", "phase": "measure", "t_sched": None, "t_start": T0, "ttft_s": 0.1, "e2e_s": 0.5,
           "itl_s": [0.2, 0.2], "prompt_tokens": 3, "output_tokens": 3, "status": "ok", "error": None,
           "worker": "w", "response_id": "x"}
    failed = [{**one, "level": f"none/c={c}", "status": "http_500", "ttft_s": None, "itl_s": [],
               "output_tokens": 0, "t_start": T0 + c} for c in (1, 2, 4)]
    for name, rows in (("one", [one]), ("failed", failed)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            result = write_report(tmp_path / name, ReportOptions(slo=SLO(ttft_ms=100)))
        assert result.html_path.exists() and result.figures
    assert result.summary.verdict.operating_point is None
    assert result.summary.verdict.cost == {"unavailable": "no level meets the SLOs"}
    assert "error rate 100.0%" in result.markdown_path.read_text()


def test_load_generator_warnings_come_from_requests_meta_json(tmp_path):
    run_dir = tmp_path / "warned"
    write_run(run_dir, levels=("none/c=1",), planned=("none/c=1",))
    update_meta(run_dir / "requests.jsonl", "none/c=1", {
        "processes": {"worker0@h:1": {"cpu_max_pct": 97.0}}, "limited_by_loadgen": True,
        "warnings": ["worker0@h:1: load generator CPU reached 97% (> 90%)"]})
    result = write_report(run_dir, ReportOptions(figures=False))
    assert result.summary.loadgen_warnings == ("none/c=1: worker0@h:1: load generator CPU reached 97% (> 90%)",)
    [level] = result.summary.levels
    assert level.loadgen.cpu_max_pct == 97.0 and level.loadgen.limited_by_loadgen is True
    markdown = result.markdown_path.read_text()
    warnings = markdown[markdown.index("## Warnings"):]
    # one line: the kind and its levels; what it means, collapsed under it
    assert "**Load generator limits**: none/c=1: worker0@h:1: load generator CPU reached 97% (> 90%); " in warnings
    assert warnings.index("**Load generator limits**") < warnings.index("What it means and how to fix it") \
        < warnings.index("## ", 3)
    assert "LIMITED BY LOAD GENERATOR" in markdown


def test_a_machine_that_drifted_is_a_note_of_its_own_not_a_warning(tmp_path):
    run_dir = tmp_path / "drifted"
    write_run(run_dir, levels=("none/c=1",), planned=("none/c=1",))
    run = json.loads((run_dir / "run.json").read_text())
    run["levels"] = [{"level": "none/c=1", "status": "ok", "exit_code": 0, "stable": True, "machine_drift": True,
                      "throughput_spread": 0.31, "spread_at_constant_speed": 0.02, "machine_speed_spread": 0.29}]
    (run_dir / "run.json").write_text(json.dumps(run))
    plain = write_report(run_dir, ReportOptions(figures=False))   # a --diagnostics instrument: not by default
    assert plain.summary.machine_drift_levels == () and "## Notes" not in plain.markdown_path.read_text()
    result = write_report(run_dir, ReportOptions(figures=False, diagnostics=True))
    assert result.summary.unstable_levels == ()
    assert result.summary.machine_drift_levels[0].machine == 0.29
    markdown = result.markdown_path.read_text()
    notes = markdown[markdown.index("## Notes"):]
    assert "**The machine's speed drifted**: none/c=1 (machine 29%, throughput 31% raw, 2% at constant speed)" in notes
    assert "throughput not stable" not in markdown.lower()
