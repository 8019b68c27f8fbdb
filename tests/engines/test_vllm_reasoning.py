"""vLLM's reasoning parser against the load generator: the tiny checkpoint built as a reasoning model
(lab/servecap/tiny_llama.py --reasoning: it closes its reasoning with </think> after a prompt-dependent
number of tokens) served by vLLM's CPU build with `--reasoning-parser deepseek_r1`.

What vLLM streams is the truth: the generated token ids say where </think> fell, its chunks say what was
sent as reasoning. The load generator's count of reasoning chunks, and the records a sweep writes (reasoning
and answer tokens, the first answer token after the first token), must agree with them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from contract.records import read_records
from loadgen.client.sse import parse_stream

pytestmark = [pytest.mark.engine, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def _greedy(server, content: str, stream: bool) -> httpx.Response:
    body = {"model": "tiny", "messages": [{"role": "user", "content": content}], "max_tokens": 48,
            "temperature": 0, "ignore_eos": True, "stream": stream, "return_token_ids": True}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=120)


def test_the_reasoning_chunks_counted_are_the_tokens_before_vllms_end_of_thinking(vllm_reasoner, reasoning_checkpoint):
    end = json.loads((reasoning_checkpoint / "tokenizer.json").read_text())
    end_id = next(token["id"] for token in end["added_tokens"] if token["content"] == "</think>")
    reasoned = 0
    for content in ("the load test server", "queue latency model", "plan measure report", "token batch cache"):
        ids = _greedy(vllm_reasoner, content, stream=False).json()["choices"][0]["token_ids"]
        lines = [(float(n), raw.encode()) for n, raw in enumerate(_greedy(vllm_reasoner, content, True).iter_lines())
                 if raw]
        parsed = parse_stream(lines)
        truth = ids.index(end_id) if end_id in ids else len(ids)   # the tokens before </think>
        assert parsed.reasoning_chunks == truth, (content, ids)
        reasoned += 0 < truth < len(ids) - 1
    assert reasoned >= 2   # replies that reasoned, then answered


def test_a_sweeps_records_split_each_reply_into_reasoning_and_answer(vllm_reasoner, tmp_path):
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "servecap", "sweep", "--url", vllm_reasoner.base_url,
                             "--concurrency", "2", "--warmup", "1s", "--duration", "6s", "--prompt-tokens",
                             "uniform:8:32", "--output-tokens", "48", "--out", str(out)],
                            capture_output=True, text=True, timeout=600, cwd=REPO)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    ok = [r for r in read_records(out / "requests.jsonl") if r["status"] == "ok"]
    assert len(ok) >= 10
    for record in ok:
        assert record["reasoning_tokens"] is not None
        assert record["reasoning_tokens"] + record["answer_tokens"] == record["output_tokens"] == 48
        if record["ttfa_s"] is not None:   # an answer came: after the first token, before the last
            assert record["ttft_s"] <= record["ttfa_s"] <= record["e2e_s"]
    both = [r for r in ok if 0 < r["reasoning_tokens"] and r["ttfa_s"] is not None and r["ttfa_s"] > r["ttft_s"]]
    assert len(both) >= len(ok) // 4, [(r["reasoning_tokens"], r["ttfa_s"]) for r in ok]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["levels"][0]["reasoning_tokens_mean"] > 0
