"""Agentic sessions against vLLM's CPU build (prefix caching on, its default): a session sweep runs end to
end, vLLM's own tool calls come back through its Hermes parser and go back as tool messages, and the
prefix-cache hits are read both from its usage and from its metrics."""

from __future__ import annotations

import json

import pytest

from vllm_env import servecap

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def test_a_session_sweep_against_vllm(vllm_server, checkpoint, tmp_path):
    out = tmp_path / "sessions"
    result = servecap("sweep", "--url", vllm_server.base_url, "--concurrency", "1,2", "--warmup", "2s",
                      "--duration", "8s", "--session", "turns:3,tools:1-2,tool-latency:0.05,tool-result:16,schemas:1",
                      "--prompt-tokens", "16", "--output-tokens", "8", "--model-config", str(checkpoint),
                      "--out", str(out))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    for level in summary["levels"]:
        sessions = level["sessions"]
        assert sessions["completed"] >= 2 and sessions["failed"] == 0 and sessions["uncalled_rounds"] == 0
        assert sessions["tool_calls_mean"] >= 3   # at least a call a turn, from vLLM's parser
        turns = level["by_turn"]
        assert sorted(turns) == ["1", "2", "3"]
        # later turns carry the history: longer prompts, and vLLM's usage says its cache served part of them
        assert turns["3"]["prompt_tokens_mean"] > turns["1"]["prompt_tokens_mean"]
        assert turns["3"]["cached_share"] > 0
        # the same hits by vLLM's own counters (vllm:prefix_cache_hits_total / queries_total) over the window
        assert 0 < level["server"]["prefix_cache_hit_rate"] < 1
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    rounds = [r for r in records if r["status"] == "ok" and r["tool_calls"]]
    assert rounds and all(r["agent"] == "main" for r in rounds)
    assert "## Agentic sessions" in (out / "report.md").read_text()
