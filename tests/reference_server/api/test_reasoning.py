"""A chat response that reasons first (`reasoning_tokens`, or the server's --reasoning-tokens): the
reasoning streams as delta.reasoning_content and delta.reasoning, then the answer as delta.content;
usage counts the reasoning; the load generator's own count of reasoning chunks equals it."""

from __future__ import annotations

import httpx
import pytest

from loadgen.client.sse import parse_stream
from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec

pytestmark = pytest.mark.slow
CHAT = {"messages": [{"role": "user", "content": "think first"}], "max_tokens": 12, "ignore_eos": True}


def stream(base_url: str, **fields) -> tuple[list[dict], list]:
    body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}, **fields}
    with httpx.stream("POST", base_url + "/v1/chat/completions", json=body, timeout=60) as reply:
        assert reply.status_code == 200, reply.read()
        lines = [(float(n), raw.encode()) for n, raw in enumerate(reply.iter_lines()) if raw]
    import json

    events = [json.loads(raw[5:]) for _, raw in lines if raw.startswith(b"data: {")]
    return events, lines


@pytest.mark.parametrize("budget", [0, 1, 5, 12])
def test_the_first_n_tokens_stream_as_reasoning_and_usage_counts_them(reference_server_tiny, budget):
    events, lines = stream(reference_server_tiny.base_url, reasoning_tokens=budget)
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    kinds = ["reasoning" if "reasoning_content" in d else "answer" for d in deltas]
    assert kinds == ["reasoning"] * budget + ["answer"] * (12 - budget)   # one token per chunk
    assert all(d["reasoning"] == d["reasoning_content"] for d in deltas if "reasoning_content" in d)
    usage = events[-1]["usage"]
    assert usage["completion_tokens"] == 12 and usage["completion_tokens_details"]["reasoning_tokens"] == budget
    assert parse_stream(lines).reasoning_chunks == budget   # the load generator counts what usage says


def test_a_whole_response_carries_its_reasoning_apart(reference_server_tiny):
    reply = httpx.post(reference_server_tiny.base_url + "/v1/chat/completions",
                       json={**CHAT, "reasoning_tokens": 4, "return_token_ids": True}, timeout=60).json()
    message = reply["choices"][0]["message"]
    assert set(message) == {"role", "content", "reasoning_content"}
    assert reply["usage"]["completion_tokens_details"] == {"reasoning_tokens": 4}
    plain = httpx.post(reference_server_tiny.base_url + "/v1/chat/completions", json=CHAT, timeout=60).json()
    assert "reasoning_content" not in plain["choices"][0]["message"]
    assert "completion_tokens_details" not in plain["usage"]


@pytest.mark.parametrize("path, fields, words", [
    ("/v1/chat/completions", {"reasoning_tokens": -1}, "reasoning_tokens"),
    ("/v1/chat/completions", {"reasoning_tokens": 13}, "reasoning_tokens (13) must not exceed max_tokens (12)"),
    ("/v1/completions", {"reasoning_tokens": 2}, "reasoning streams in chat completions"),
])
def test_a_bad_reasoning_budget_gets_a_400_naming_the_field(reference_server_tiny, path, fields, words):
    body = {**CHAT, **fields} if "chat" in path else {"prompt": "x", "max_tokens": 12, **fields}
    reply = httpx.post(reference_server_tiny.base_url + path, json=body, timeout=60)
    assert reply.status_code == 400 and words in reply.json()["error"]["message"]
    assert reply.json()["error"]["param"] == "reasoning_tokens"


def test_the_servers_default_reasoning_applies_to_requests_that_name_none():
    spec = ReferenceServerSpec.from_flags(["--model", "tiny", "--reasoning-tokens", "3", "--no-classifier",
                                           "--no-embedding", "--engine-mode", "thread"])
    with ServerProcess(spec) as server:
        events, _ = stream(server.base_url)
        assert events[-1]["usage"]["completion_tokens_details"]["reasoning_tokens"] == 3
        events, _ = stream(server.base_url, reasoning_tokens=0)   # the request's own field wins
        assert events[-1]["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0


def test_reasoning_effort_draws_from_the_servers_map_on_an_emulated_gpu_too():
    """OpenAI's reasoning_effort, sent by the official client: each effort reasons for its draw of
    --reasoning-effort-tokens; "none" answers at once; reasoning_tokens, given, wins; an emulated GPU
    (no forward pass) streams the same split."""
    import openai

    spec = ReferenceServerSpec.from_flags(["--emulate", "h100-sxm", "--model", "llama-3.1-8b", "--no-classifier",
                                           "--no-embedding", "--reasoning-tokens", "2",
                                           "--reasoning-effort-tokens", "low=3,high=7"])
    with ServerProcess(spec) as server:
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="none")

        def reasoned(budget: int | None = None, **fields) -> int:
            extra = {"ignore_eos": True, **({} if budget is None else {"reasoning_tokens": budget})}
            reply = client.chat.completions.create(model="llama-3.1-8b", max_tokens=12, stream=True,
                                                   stream_options={"include_usage": True},
                                                   messages=CHAT["messages"], extra_body=extra, **fields)
            chunks = list(reply)
            thinking = [c for c in chunks if c.choices and getattr(c.choices[0].delta, "reasoning_content", None) is not None]
            count = chunks[-1].usage.completion_tokens_details.reasoning_tokens
            assert len(thinking) == count   # one token a chunk: what streamed as reasoning is what usage counts
            return count

        assert "emulated h100-sxm" in server.output()
        assert reasoned() == 2                                   # the server's --reasoning-tokens
        assert reasoned(reasoning_effort="low") == 3
        assert reasoned(reasoning_effort="high") == 7
        assert reasoned(reasoning_effort="medium") == 12         # the default map's 1024, capped at max_tokens
        assert reasoned(reasoning_effort="none") == 0
        assert reasoned(5, reasoning_effort="high") == 5
        for path, body in (("/v1/chat/completions", {**CHAT, "reasoning_effort": "extreme"}),
                           ("/v1/completions", {"prompt": "x", "max_tokens": 4, "reasoning_effort": "low"})):
            reply = httpx.post(server.base_url + path, json=body, timeout=60)
            assert reply.status_code == 400 and reply.json()["error"]["param"] == "reasoning_effort", reply.text
