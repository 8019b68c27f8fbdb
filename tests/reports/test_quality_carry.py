"""A run's quality.json in its report: the sentence, and the configuration statement side by side."""

from __future__ import annotations

import json

import pytest

from contract.level_result import LevelResult, Offered
from lab.reports.synthetic import write_synthetic_run
from reports.quality.carry import configuration_statement, quality_sentence, read_quality
from servecap.cli import main as servecap_main

QUALITY = {"kind": "servecap-quality", "mode": "in-process", "a": {"server_args": ""},
           "b": {"server_args": "--quantization int8"}, "prompts": 32, "max_tokens": 64,
           "measures": {"prefix_agreement": {"mean": 0.8, "ci95": [0.7, 0.9], "n": 32},
                        "top1_agreement": {"mean": 0.97, "ci95": [0.95, 0.99], "n": 32},
                        "kl_mean": {"mean": 0.0012, "ci95": [0.001, 0.0014], "n": 32}, "identical_outputs": 0.5}}


def _with_engine(run_dir, kv_cache_bytes, quantization=None):
    path = run_dir / "run.json"
    run = json.loads(path.read_text())
    for engine in run["server"]["engines"].values():
        engine.update(kv_cache_bytes=kv_cache_bytes, quantization=quantization)
    path.write_text(json.dumps(run))
    return run_dir


@pytest.fixture(scope="module")
def fp32_and_int8(tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    a = _with_engine(write_synthetic_run(base / "fp32", records=400, strategies=("continuous",),
                                         concurrencies=(1, 4)), 1_000_000_000)
    b = _with_engine(write_synthetic_run(base / "int8", records=400, strategies=("continuous",),
                                         concurrencies=(1, 4), seed=1), 1_900_000_000, "int8")
    (b / "quality.json").write_text(json.dumps(QUALITY))
    return a, b


def test_side_by_side_states_kv_room_tokens_per_s_and_agreement(fp32_and_int8, tmp_path):
    a, b = fp32_and_int8
    out = tmp_path / "side"
    assert servecap_main(["report", str(a), str(b), "--out", str(out), "--no-figures"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    rows = {lvl["level"]: lvl for lvl in summary["levels"]}
    ratio = rows["B: continuous/c=4"]["output_tokens_per_s"] / rows["A: continuous/c=4"]["output_tokens_per_s"]
    assert summary["configurations"] == [f"B (int8) against A: 1.9x the KV room, {ratio:.2g}x output tokens/s at "
                                         "c=4, 97.0% top-1 greedy agreement"]
    assert summary["quality"]["B"]["measures"]["top1_agreement"]["mean"] == 0.97
    markdown = (out / "report.md").read_text()
    assert "B (int8) against A: 1.9x the KV room" in markdown
    assert "B: Quality against `defaults` (32 seeded prompts, 64 greedy tokens each): top1 agreement 97.0% " \
           "(95% CI 95.0%-99.0%)" in markdown


def test_a_single_report_carries_its_quality_and_names_an_unreadable_file(fp32_and_int8, tmp_path):
    _, b = fp32_and_int8
    assert servecap_main(["report", str(b), "--no-figures"]) == 0
    summary = json.loads((b / "summary.json").read_text())
    assert summary["quality"]["mode"] == "in-process"
    assert "Quality against `defaults`" in (b / "report.md").read_text()
    broken = write_synthetic_run(tmp_path / "broken", records=200, strategies=("continuous",), concurrencies=(1,))
    (broken / "quality.json").write_text("{not json")
    assert servecap_main(["report", str(broken), "--no-figures"]) == 0
    summary = json.loads((broken / "summary.json").read_text())
    assert summary["quality"] is None
    assert any("quality.json is unreadable" in note for note in summary["missing"])


def test_the_statement_and_sentence_from_what_there_is():
    assert read_quality("/nonexistent") == (None, None)
    levels = [LevelResult(level="c=8", offered=Offered("concurrency", 8), output_tokens_per_s=100.0)]
    faster = [LevelResult(level="c=8", offered=Offered("concurrency", 8), output_tokens_per_s=130.0),
              LevelResult(level="c=16", offered=Offered("concurrency", 16),
                          output_tokens_per_s=150.0)]   # c=16: only B measured it
    assert configuration_statement("B", "A", (None, levels), (None, faster, None)) == \
        "B against A: 1.3x output tokens/s at c=8"
    assert configuration_statement("B", "A", (None, levels), (None, [], None)) is None
    endpoints = {**QUALITY, "a": {"url": "http://127.0.0.1:8000"}, "measures": {
        "prefix_agreement": {"mean": 0.5, "ci95": [0.4, 0.6], "n": 4}, "kl_mean": {"mean": None, "ci95": None, "n": 0}}}
    assert quality_sentence(endpoints) == ("Quality against http://127.0.0.1:8000 (32 seeded prompts, 64 greedy "
                                           "tokens each): prefix agreement 50.0% (95% CI 40.0%-60.0%)")
    assert configuration_statement("B", "A", (None, []), (None, [], endpoints)) == \
        "B against A: 50.0% prefix greedy agreement"
