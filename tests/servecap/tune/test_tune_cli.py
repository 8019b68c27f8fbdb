"""`servecap tune` for real: each configuration a one-level sweep of its own server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from loadgen_helpers import _env

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def tune(tmp_path, *flags: str) -> dict:
    out = tmp_path / "tune"
    result = subprocess.run([sys.executable, "-m", "servecap", "tune", "--out", str(out), "--warmup", "1s",
                             "--duration", "3s", *flags], capture_output=True, text=True, timeout=400, env=_env())
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert result.stdout.strip().endswith("tune.md")
    return json.loads((out / "tune.json").read_text())


def test_tuning_the_classifier_measures_a_third_of_the_grid_and_names_the_best(tmp_path):
    doc = tune(tmp_path, "--scenario", "classify", "--concurrency", "2,4", "--slo-e2e-ms", "1000",
               "--classifier-max-queue-delay-us", "0,1000,2000", "--classifier-instances", "1,2")
    assert doc["grid_size"] == 6 and doc["measured"] == doc["budget"] == 2 and doc["mode"] == "guided"
    first = doc["configurations"][0]
    assert first["config"] == "classifier-max-queue-delay-us=0, classifier-instances=1"
    assert all(c["meets_slo"] and c["unit"] == "req/s" and c["throughput"] > 0 for c in doc["configurations"])
    best = max(doc["configurations"], key=lambda c: c["throughput"])
    assert doc["best"]["config"] == best["config"] and doc["pareto_front"]


def test_tuning_an_llm_strategys_limits_against_ttft_and_tpot(tmp_path):
    doc = tune(tmp_path, "--concurrency", "4", "--prompt-tokens", "32", "--output-tokens", "8",
               "--slo-ttft-ms", "60000", "--slo-tpot-ms", "60000", "--max-num-seqs", "2,4", "--exhaustive")
    assert doc["measured"] == doc["grid_size"] == 2
    by_config = {c["config"]: c for c in doc["configurations"]}
    assert set(by_config) == {"max-num-seqs=2", "max-num-seqs=4"}
    for config in by_config.values():
        assert config["unit"] == "output tok/s" and config["throughput"] > 0 and config["meets_slo"]
        assert set(config["p99_ms"]) == {"ttft_ms", "tpot_ms", "e2e_ms", "ttfa_ms"}   # ttfa = ttft: nothing reasons
    engine = json.loads((tmp_path / "tune" / "configs" / "00" / "run.json").read_text())["server"]["engines"]
    assert engine["continuous"]["strategy_limits"]["max_num_seqs"] in (2, 4)
