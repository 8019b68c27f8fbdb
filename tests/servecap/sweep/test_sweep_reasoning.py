"""A sweep of a server that reasons first (`--reasoning-tokens`): each record's time to the first answer
token and its reasoning and answer tokens; the report's TTFA and an SLO on it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contract.records import read_records
from loadgen_helpers import _env

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def test_a_reasoning_servers_records_report_and_slo_use_the_first_answer_token(tmp_path):
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "servecap", "sweep", "--out", str(out), "--concurrency", "2",
                             "--server-args", "--reasoning-tokens 8", "--prompt-tokens", "16", "--output-tokens", "16",
                             "--warmup", "2s", "--duration", "5s", "--slo-ttfa-ms", "60000", "--no-pin-cpus"],
                            capture_output=True, text=True, timeout=300, env=_env())
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    ok = [r for r in read_records(out / "requests.jsonl") if r["status"] == "ok" and r["phase"] == "measure"]
    assert len(ok) >= 4
    for record in ok:
        assert (record["output_tokens"], record["reasoning_tokens"], record["answer_tokens"]) == (16, 8, 8)
        assert 0 < record["ttft_s"] < record["ttfa_s"] < record["e2e_s"]   # the answer starts after 8 tokens
    summary = json.loads((out / "summary.json").read_text())
    [level] = summary["levels"]
    assert level["metrics"]["ttfa_s"]["p99"] > level["metrics"]["ttft_s"]["p99"]
    assert level["reasoning_tokens_mean"] == 8
    assert summary["verdict"]["slo"]["ttfa_ms"] == 60000
    assert "ttfa_s" in (out / "report.md").read_text()


def test_the_load_generator_asks_each_request_its_reasoning_from_the_data_or_the_flag(tmp_path):
    """--reasoning-tokens on the sweep: each request asks its own budget (the reference server's extension);
    a dataset reply's reasoning gives that request's instead. run.json keeps the flag."""
    data = tmp_path / "reasoning.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "why?"},
                                             {"role": "assistant", "content": "a" * 6, "reasoning_content": "r" * 10}]})
                    + "\n" + json.dumps({"prompt": "no reasoning in the data", "output_tokens": 16}) + "\n")
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "servecap", "sweep", "--out", str(out), "--concurrency", "2",
                             "--dataset", str(data), "--chars-per-token", "1", "--reasoning-tokens", "uniform:2:5",
                             "--warmup", "1s", "--duration", "4s", "--no-pin-cpus"],
                            capture_output=True, text=True, timeout=300, env=_env())
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    ok = [r for r in read_records(out / "requests.jsonl") if r["status"] == "ok"]
    from_data = [r for r in ok if r["output_tokens"] == 16 and r["reasoning_tokens"] == 10]
    from_flag = [r for r in ok if r["output_tokens"] == 16 and 2 <= r["reasoning_tokens"] <= 5]
    assert from_data and from_flag and len(from_data) + len(from_flag) == len(ok)
    assert json.loads((out / "run.json").read_text())["workload"]["reasoning_tokens"] == "uniform:2:5"
