"""A sweep of the reference server serving LoRA adapters, its requests drawn from a Zipf mix over them: the
records name the adapter, the engine's record its slot wait, and the report gives latency per adapter."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contract.records import read_records
from loadgen_helpers import _env
from servecap.experiment.run_json import workload_for
from sweep_helpers import command, experiment


def test_the_model_mix_reaches_locust_and_run_json(tmp_path):
    config = experiment("--concurrency", "2", "--model-mix", "zipf:8:1.2")
    argv = command(config, "c=2", 2, 1, 2, records=tmp_path / "r.jsonl")
    assert argv[argv.index("--model-mix") + 1] == "zipf:8:1.2"
    assert workload_for(config).model_mix == "zipf:8:1.2"
    with pytest.raises(ValueError, match="--model-mix 'zipf:0': N must be >= 1"):
        experiment("--concurrency", "2", "--model-mix", "zipf:0")


@pytest.mark.slow
@pytest.mark.e2e
def test_a_lora_sweep_reports_latency_per_adapter_and_the_slot_waits(tmp_path):
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "servecap", "sweep", "--out", str(out), "--strategies", "continuous",
                             "--concurrency", "1,2,4", "--server-args", "--enable-lora --random-loras 6 --max-loras 2",
                             "--model-mix", "zipf:6", "--warmup", "2s", "--duration", "5s", "--prompt-tokens", "32",
                             "--output-tokens", "16", "--no-pin-cpus"],
                            capture_output=True, text=True, timeout=300, env=_env())
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    records = [r for r in read_records(out / "requests.jsonl") if r["status"] == "ok"]
    assert {r["model"] for r in records} <= {f"lora-{k}" for k in range(1, 7)} and len(records) > 100
    counts = {k: sum(r["model"] == f"lora-{k}" for r in records) for k in range(1, 7)}
    assert counts[1] > counts[6]   # Zipf: the first adapter the busiest
    import pandas as pd

    engine_requests = pd.read_csv(out / "engine_requests.csv")
    assert (engine_requests["cached_tokens"] == 0).all()   # every level's prompts its own; adapters' blocks apart
    summary = json.loads((out / "summary.json").read_text())
    level = summary["levels"][2]   # c=4
    assert set(level["by_model"]) <= {f"lora-{k}" for k in range(1, 7)}
    assert sum(m["requests"] for m in level["by_model"].values()) == level["ok"]
    waits = level["lora_slot_waits"]
    assert waits["requests"] == level["ok"] and 0 < waits["waited_share"] < 1   # six adapters over two slots
    assert waits["ttft_p50_waited_s"] > waits["ttft_p50_not_waited_s"]
    report = (out / "report.md").read_text()
    assert "## Latency by model" in report and "waited for a LoRA adapter slot" in report
    engine = json.loads((out / "run.json").read_text())["server"]["engines"]["continuous"]["lora"]
    assert engine["max_loras"] == 2 and len(engine["adapters"]) == 6
    calibration = summary["validation"]["by_strategy"]["continuous"]["calibration"]   # the prediction knows the slots
    assert calibration["lora"]["max_loras"] == 2 and calibration["lora"]["mix"] == len(level["by_model"])
    assert calibration["lora"]["load_ms"] > 0 and "lora" in calibration["sources"]
