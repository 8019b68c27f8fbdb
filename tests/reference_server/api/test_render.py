"""vLLM's render endpoints: the prompt's token ids as the request would be served, nothing generated.

vLLM's router (`cache_aware`) asks a worker for them to route on tokens; without them it falls back
to load alone. The ids are exactly those the generation request's `usage.prompt_tokens` counts.
"""

from __future__ import annotations

import pytest
from tiny_app import tiny_app

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def client():
    with tiny_app() as client:
        yield client


def test_render_gives_the_ids_the_request_would_be_served_with(client):
    completion = {"model": "tiny", "prompt": "Hi", "max_tokens": 1, "return_token_ids": True}
    rendered = client.post("/v1/completions/render", json=completion).json()
    served = client.post("/v1/completions", json=completion).json()
    assert rendered["token_ids"] == served["choices"][0]["prompt_token_ids"] == [256, ord("H"), ord("i")]
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 1}
    ids = client.post("/v1/chat/completions/render", json=chat).json()["token_ids"]
    assert len(ids) == client.post("/v1/chat/completions", json=chat).json()["usage"]["prompt_tokens"]
    assert bytes(t for t in ids if t < 256) == b"Hello"


def test_render_refuses_what_generation_refuses(client):
    bad = client.post("/v1/completions/render", json={"model": "tiny", "prompt": [1, 99999]})
    assert bad.status_code == 400 and "token ids" in bad.json()["error"]["message"]
    assert client.post("/v1/chat/completions/render", json={"model": "other", "messages": []}).status_code in (400, 404)
