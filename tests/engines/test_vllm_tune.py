"""`servecap tune` over vLLM's CPU build: each configuration a vLLM server of its own, started from the same
command with its --max-num-seqs and --max-num-batched-tokens, measured under load and judged by the SLO."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_env import OFFLINE, VLLM_KV_GIB, VLLM_PYTHON
from contract.records import Record, read_records
from contract.slo import SLO, SloSample, judge

pytestmark = [pytest.mark.engine, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def test_tune_finds_vllms_best_batching_under_the_slo(checkpoint, tmp_path):
    out = tmp_path / "tune"
    command = (f"{VLLM_PYTHON} -m vllm.entrypoints.openai.api_server --model {checkpoint} --host 127.0.0.1 "
               "--port {port} --served-model-name tiny --dtype float32 --max-model-len 512 --enforce-eager")
    slo = SLO(ttft_ms=30000, e2e_ms=60000)
    done = subprocess.run(
        [sys.executable, "-m", "servecap", "tune", "--out", str(out), "--server-cmd", command,
         "--ready-path", "/v1/models", "--concurrency", "4", "--warmup", "2s", "--duration", "6s",
         "--prompt-tokens", "uniform:16:64", "--output-tokens", "16", "--slo-ttft-ms", "30000", "--slo-e2e-ms", "60000",
         "--max-num-seqs", "1,4", "--max-num-batched-tokens", "256,512", "--exhaustive", "--no-pin-cpus"],
        capture_output=True, text=True, timeout=1500, cwd=REPO,
        env={**os.environ, **OFFLINE, "VLLM_CPU_KVCACHE_SPACE": VLLM_KV_GIB})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    doc = json.loads((out / "tune.json").read_text())
    assert doc["measured"] == doc["grid_size"] == 4 and doc["target"] == command
    for config in doc["configurations"]:
        run_dir = Path(config["run_dir"])
        run = json.loads((run_dir / "run.json").read_text())
        started = run["target"]["command"]   # vLLM started with this configuration's flags, {port} filled in
        for part in config["server_args"].split("--")[1:]:
            flag, value = part.split()
            assert started[started.index(f"--{flag}") + 1] == value
        assert run["server"]["serving_engine"] == "vllm"
        # each configuration's verdict is the contract's rule over its own measured records
        records = [Record.from_dict(r) for r in read_records(run_dir / "requests.jsonl") if r["phase"] == "measure"]
        assert config["throughput"] > 0 and config["meets_slo"] == judge(slo, SloSample.from_records(records)).meets
    meeting = [c for c in doc["configurations"] if c["meets_slo"]]
    assert meeting, "no configuration met a 30 s TTFT SLO"
    assert doc["best"]["config"] == max(meeting, key=lambda c: c["throughput"])["config"]
    # one sequence at a time cannot beat four under four users
    by_config = {c["config"]: c for c in doc["configurations"]}
    assert by_config["max-num-seqs=4, max-num-batched-tokens=512"]["throughput"] > \
        by_config["max-num-seqs=1, max-num-batched-tokens=512"]["throughput"]
