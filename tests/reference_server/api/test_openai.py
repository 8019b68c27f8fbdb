"""End to end: the real `openai` client against a live `python -m reference_server` (tiny preset)."""

from __future__ import annotations

import os

import httpx
import openai
import pytest

from reference_server.runtime.engine_threads import engine_threads

pytestmark = pytest.mark.slow

BOS = 256


@pytest.fixture(scope="module")
def server(reference_server_tiny):
    return reference_server_tiny   # tiny preset, continuous strategy (tests/conftest.py)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=60)


def chat_prompt_tokens(messages: list[dict]) -> int:
    """The documented template: <|bos|> (<|role|> bytes <|end|>)* <|assistant|>."""
    return 2 + sum(2 + len(m["content"].encode()) for m in messages)


def test_chat_non_streaming_usage_is_exact(client):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Grüße, wie geht's?"}]
    response = client.chat.completions.create(
        model="tiny", messages=messages, max_tokens=12, extra_body={"ignore_eos": True})
    assert response.object == "chat.completion"
    assert response.choices[0].message.role == "assistant"
    assert response.choices[0].finish_reason == "length"
    assert response.usage.prompt_tokens == chat_prompt_tokens(messages) == 2 + 11 + 22
    assert response.usage.completion_tokens == 12
    assert response.usage.total_tokens == response.usage.prompt_tokens + 12


def test_completion_non_streaming_usage_is_exact(client):
    prompt = "The capital of France is"
    response = client.completions.create(model="tiny", prompt=prompt, max_tokens=7, extra_body={"ignore_eos": True})
    assert response.object == "text_completion"
    assert response.usage.prompt_tokens == 1 + len(prompt.encode())   # BOS + bytes
    assert response.usage.completion_tokens == 7
    assert response.choices[0].finish_reason == "length"


def test_completion_token_id_prompt_counts_ids_as_given(client):
    response = client.completions.create(model="tiny", prompt=[BOS, 72, 105, 33], max_tokens=3,
                                         extra_body={"ignore_eos": True})
    assert response.usage.prompt_tokens == 4
    assert response.usage.completion_tokens == 3


def test_default_completion_max_tokens_is_16(client):
    response = client.completions.create(model="tiny", prompt="x", extra_body={"ignore_eos": True})
    assert response.usage.completion_tokens == 16


def test_min_tokens_defers_end_of_sequence_to_the_limit(client):
    response = client.completions.create(model="tiny", prompt="m", max_tokens=12, temperature=0,
                                         extra_body={"min_tokens": 12})
    assert response.usage.completion_tokens == 12 and response.choices[0].finish_reason == "length"


def test_streamed_chat_token_count_equals_max_tokens_with_ignore_eos(client):
    stream = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "count"}], max_tokens=40, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    chunks = list(stream)
    choice_chunks = [c for c in chunks if c.choices]
    assert len(choice_chunks) == 40   # one chunk per generated token
    assert choice_chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in choice_chunks].count("length") == 1
    assert choice_chunks[-1].choices[0].finish_reason == "length"
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == [] and usage_chunk.usage.completion_tokens == 40
    assert usage_chunk.usage.prompt_tokens == chat_prompt_tokens([{"role": "user", "content": "count"}])
    assert all(c.usage is None for c in choice_chunks)
    assert len({c.id for c in chunks}) == 1


def test_streamed_completion_text_matches_non_streamed_with_same_seed(client):
    kwargs = dict(model="tiny", prompt="seeded", max_tokens=25, seed=1234, temperature=0.8,
                  extra_body={"ignore_eos": True})
    full = client.completions.create(**kwargs).choices[0].text
    streamed = "".join(c.choices[0].text for c in client.completions.create(stream=True, **kwargs) if c.choices)
    assert streamed == full


def test_first_chunk_arrives_while_the_generation_is_still_running(server):
    """Speed-independent: when the first chunk reaches the client, the server is still generating
    (a buffered response could only arrive after the last token)."""
    def metric(name: str) -> float:
        text = httpx.get(server.base_url + "/metrics").text
        return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")))

    generated_before = metric("servecap_generation_tokens_total")
    body = {"model": "tiny", "prompt": "long", "max_tokens": 1000, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", server.base_url + "/v1/completions", json=body, timeout=120) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = (line for line in response.iter_lines() if line.startswith("data: "))
        next(events)
        assert metric("servecap_requests_running") == 1
        assert metric("servecap_generation_tokens_total") - generated_before < 1000
        assert len([event for event, _ in zip(events, range(20))]) == 20   # and more keep coming
    # leaving the block disconnects: the rest of the 1000 tokens is aborted, not generated


def test_return_token_ids_gives_the_generated_and_prompt_ids_as_vllm_does(client):
    prompt = [10, 20, 30, 40]
    body = {"ignore_eos": True, "return_token_ids": True}
    full = client.completions.create(model="tiny", prompt=prompt, max_tokens=6, temperature=0, extra_body=body)
    choice = full.model_dump()["choices"][0]
    assert choice["prompt_token_ids"] == prompt and len(choice["token_ids"]) == 6 == full.usage.completion_tokens
    chunks = [c.model_dump() for c in client.completions.create(model="tiny", prompt=prompt, max_tokens=6,
                                                                temperature=0, stream=True, extra_body=body)]
    assert [t for c in chunks for t in c["choices"][0]["token_ids"]] == choice["token_ids"]
    assert chunks[0]["choices"][0]["prompt_token_ids"] == prompt and "prompt_token_ids" not in chunks[1]["choices"][0]
    plain = client.completions.create(model="tiny", prompt=prompt, max_tokens=2).model_dump()["choices"][0]
    assert "token_ids" not in plain


def test_response_ids_are_unique(client):
    ids = {client.completions.create(model="tiny", prompt="a", max_tokens=1).id for _ in range(5)}
    ids |= {client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "a"}],
                                           max_tokens=1).id for _ in range(5)}
    assert len(ids) == 10


def test_stop_string_truncates_and_reports_stop(client):
    kwargs = dict(model="tiny", prompt="stop test", max_tokens=24, temperature=0, extra_body={"ignore_eos": True})
    reference = client.completions.create(**kwargs).choices[0].text
    # a two-character stop string from the middle of the greedy output (no U+FFFD in it)
    middle_first = sorted(range(1, len(reference) - 1), key=lambda i: abs(i - len(reference) // 2))
    windows = [reference[i:i + 2] for i in middle_first]
    stop = next(w for w in windows if "\ufffd" not in w)
    stopped = client.completions.create(stop=[stop], **kwargs)
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.choices[0].text == reference[: reference.index(stop)]
    assert stopped.usage.completion_tokens < 24
    streamed = client.completions.create(stop=[stop], stream=True, **kwargs)
    assert "".join(c.choices[0].text for c in streamed if c.choices) == stopped.choices[0].text


def test_models_lists_served_model_and_engine_configuration(client, server):
    models = client.models.list().data
    assert [m.id for m in models] == ["tiny"]
    engine = httpx.get(server.base_url + "/v1/engine").json()
    assert engine["strategy"] == "continuous"
    assert engine["block_size"] == 16
    assert engine["num_kv_blocks"] > 0
    assert engine["kv_cache_bytes"] == engine["num_kv_blocks"] * engine["kv_block_bytes"]
    assert engine["max_model_len"] == 2048
    # no --num-threads: every core but one, left to the front end and the load generator (engine_threads)
    assert engine["num_threads"] == engine_threads() == max(1, len(os.sched_getaffinity(0)) - 1)
    assert server.base_url.endswith(f":{engine['server']['port']}")   # the real port, not --port 0
    assert models[0].model_extra["engine"]["num_kv_blocks"] == engine["num_kv_blocks"]


def test_metrics_expose_the_servecap_names_and_count_tokens(client, server):
    def scrape() -> str:
        return httpx.get(server.base_url + "/metrics").text

    def value(text: str, name: str) -> float:
        return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")))

    before = scrape()
    client.completions.create(model="tiny", prompt="metric", max_tokens=9, extra_body={"ignore_eos": True})
    after = scrape()
    for name in ("servecap_requests_running", "servecap_requests_waiting", "servecap_kv_blocks_used",
                 "servecap_kv_blocks_total", "servecap_batch_size_bucket", "servecap_prefix_cache_hits_total",
                 "servecap_time_to_first_token_seconds_bucket", "servecap_requests_rejected_total"):
        assert name in after, name
    assert value(after, "servecap_generation_tokens_total") - value(before, "servecap_generation_tokens_total") == 9
    assert value(after, "servecap_prompt_tokens_total") - value(before, "servecap_prompt_tokens_total") == 7
    assert value(after, "servecap_time_to_first_token_seconds_count") \
        == value(before, "servecap_time_to_first_token_seconds_count") + 1
    assert value(after, "servecap_kv_blocks_used") == 0
    for phase in ("queue", "prefill", "decode", "inference"):   # the engine-side phases, named as vLLM's
        name = f"servecap_request_{phase}_time_seconds_count"
        assert value(after, name) == value(before, name) + 1, name
    seconds = {phase: value(after, f"servecap_request_{phase}_time_seconds_sum")
               - value(before, f"servecap_request_{phase}_time_seconds_sum") for phase in ("prefill", "decode", "inference")}
    assert seconds["inference"] == pytest.approx(seconds["prefill"] + seconds["decode"], abs=1e-6)
    e2e = value(after, "servecap_e2e_request_latency_seconds_sum") - value(before, "servecap_e2e_request_latency_seconds_sum")
    assert 0 < seconds["inference"] <= e2e
    assert value(after, "servecap_iteration_tokens_count") > value(before, "servecap_iteration_tokens_count")


def test_health_and_ready(server):
    assert httpx.get(server.base_url + "/health").json() == {"status": "ok"}
    assert httpx.get(server.base_url + "/ready").status_code == 200
