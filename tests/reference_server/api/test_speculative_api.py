"""Speculative decoding through the OpenAI API: the same greedy text, vLLM's spec-decode counters in
/metrics, and the engine saying it speculates."""

import re

import pytest

from tiny_app import tiny_app

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BODY = {"model": "tiny", "messages": [{"role": "user", "content": "abcabcabcabc abcabc"}], "max_tokens": 48,
        "temperature": 0, "stream": True, "ignore_eos": True}


def _streamed_text(client) -> str:
    with client.stream("POST", "/v1/chat/completions", json=BODY) as response:
        assert response.status_code == 200
        body = "".join(response.iter_text())
    return "".join(re.findall(r'"content":"((?:[^"\\]|\\.)*)"', body))


def _counter(metrics: str, name: str) -> float:
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", metrics, re.M))


def test_a_speculating_server_streams_the_same_greedy_text_and_counts_its_drafts():
    with tiny_app(engine={"strategy": "continuous"}) as client:
        plain = _streamed_text(client)
    with tiny_app(engine={"strategy": "continuous", "speculative_method": "ngram", "num_speculative_tokens": 4}) as client:
        assert _streamed_text(client) == plain
        speculative = client.get("/v1/engine").json()["speculative"]
        assert speculative["method"] == "ngram" and speculative["num_speculative_tokens"] == 4
        metrics = client.get("/metrics").text
    drafts = _counter(metrics, "servecap_spec_decode_num_drafts_total")
    proposed = _counter(metrics, "servecap_spec_decode_num_draft_tokens_total")
    accepted = _counter(metrics, "servecap_spec_decode_num_accepted_tokens_total")
    assert drafts > 0 and 0 < accepted <= proposed <= 4 * drafts
    assert _counter(metrics, "servecap_spec_decode_num_accepted_tokens_per_pos_total") == accepted


def test_a_draft_model_streams_the_same_greedy_text_and_emulated_acceptance_says_it_is_emulated():
    with tiny_app(engine={"strategy": "continuous"}) as client:
        plain = _streamed_text(client)
    draft = {"strategy": "continuous", "speculative_method": "draft", "num_speculative_tokens": 3,
             "speculative_model": "tiny"}
    with tiny_app(engine=draft) as client:
        assert _streamed_text(client) == plain
        speculative = client.get("/v1/engine").json()["speculative"]
        assert (speculative["method"], speculative["mode"], speculative["speculative_model"]) == ("draft", "exact", "tiny")
        assert speculative["draft_kv_cache_bytes"] > 0
    with tiny_app(engine={**draft, "speculative_acceptance": (0.5,)}) as client:
        assert len(_streamed_text(client)) > 0
        speculative = client.get("/v1/engine").json()["speculative"]
        assert speculative["mode"] == "emulated-acceptance" and speculative["acceptance_per_position"] == [0.5, 0.25, 0.125]
