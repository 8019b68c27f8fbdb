"""`servecap sweep` against targets other than its own reference server, and its searching profiles, for real."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contract.records import read_records
from loadgen_helpers import _env, scripted_server

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def test_a_sweep_of_an_external_command_starts_it_and_measures_it_as_it_is(tmp_path):
    """Any engine as a command with {port}: the runner picks the port, waits for GET /health, and describes the
    target only by what it tells (here the reference server itself, started as a foreign command)."""
    out = tmp_path / "run"
    command = f"{sys.executable} -m reference_server --port {{port}} --model tiny --max-num-seqs 4 --engine-mode thread"
    done = subprocess.run([sys.executable, "-m", "servecap", "sweep", "--out", str(out), "--server-cmd", command,
                           "--concurrency", "1,2", "--warmup", "1s", "--duration", "2s", "--prompt-tokens", "16",
                           "--output-tokens", "8", "--no-pin-cpus", "--slo-e2e-ms", "60000"],
                          capture_output=True, text=True, timeout=300, env=_env())
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    assert run["target"]["kind"] == "command" and "--port" in run["target"]["command"]
    port = run["target"]["command"][run["target"]["command"].index("--port") + 1]
    assert port.isdigit() and int(port) > 0   # {port} filled in
    assert run["server"]["serving_engine"] == "servecap" and run["server"]["strategy"] == "unknown"
    assert [entry["level"] for entry in run["levels"]] == ["c=1", "c=2"]
    records = read_records(out / "requests.jsonl")
    assert records and all(r["status"] == "ok" for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert [level["level"] for level in summary["levels"]] == ["c=1", "c=2"]
    assert (out / "server-command.log").exists()


def test_a_rate_sweep_runs_from_the_synchronous_rate_to_saturation(tmp_path):
    out = tmp_path / "run"
    with scripted_server(tmp_path, "--ttft", "0.004", "--itl", "0.002") as (url, _):
        done = subprocess.run([sys.executable, "-m", "servecap", "sweep", "--url", url, "--out", str(out),
                               "--rate-sweep", "4", "--warmup", "0.5s", "--duration", "1.5s", "--output-tokens", "4",
                               "--prompt-tokens", "8", "--no-pin-cpus", "--no-report"],
                              capture_output=True, text=True, timeout=300, env=_env())
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    levels = [entry["level"] for entry in run["levels"]]
    assert levels[:2] == ["c=1", "c=256"] and len(levels) == 4 and all(lv.startswith("rps=") for lv in levels[2:])
    rates = [entry["load"] for entry in run["levels"][2:]]
    assert rates == sorted(rates) and rates[0] < rates[1]
    assert run["load_plan"]["kind"] == "rate_sweep"
    records = read_records(out / "requests.jsonl")
    opened = [r for r in records if r["level"] == levels[-1]]
    assert opened and all(r["t_sched"] is not None for r in opened)   # open loop: sent at their slots
