"""POST /v1/embeddings on the reference server's seeded embedding model, with the official `openai`
client: vectors, usage, base64, batching, and each bad input's 400."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest

from reference_server.embedding.config import EmbeddingConfig
from reference_server.embedding.model import TextEncoder

pytestmark = pytest.mark.slow

TEXTS = ["hello", "a longer sentence, with punctuation.", "x" * 300, "ünïcödé"]
EXPECTED = TextEncoder(EmbeddingConfig(seed=7))   # the shared server's seed (conftest)


def alone(text: str) -> np.ndarray:
    return EXPECTED.embed([np.frombuffer(text.encode(), dtype=np.uint8).astype(np.int64)])[0]


def test_the_openai_client_gets_the_seeded_models_embeddings(reference_server_tiny):
    from openai import OpenAI

    client = OpenAI(base_url=reference_server_tiny.base_url + "/v1", api_key="unused")
    reply = client.embeddings.create(model="servecap-embed", input=TEXTS)   # the client asks for base64
    assert [d.index for d in reply.data] == [0, 1, 2, 3]
    vectors = np.array([d.embedding for d in reply.data])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    for text, vector in zip(TEXTS, vectors):
        np.testing.assert_allclose(vector, alone(text), atol=1e-5)   # padded in a batch = alone
    assert reply.usage.prompt_tokens == sum(len(t.encode()) for t in TEXTS) == reply.usage.total_tokens


def test_concurrent_requests_batch_and_keep_their_own_vectors(reference_server_tiny):
    url = reference_server_tiny.base_url + "/v1/embeddings"

    async def send_all():
        async with httpx.AsyncClient(timeout=30) as client:
            return await asyncio.gather(*(client.post(url, json={"input": t, "encoding_format": "float"})
                                          for t in TEXTS * 4))

    replies = asyncio.run(send_all())
    for text, reply in zip(TEXTS * 4, replies):
        assert reply.status_code == 200, reply.text
        np.testing.assert_allclose(reply.json()["data"][0]["embedding"], alone(text), atol=1e-5)
    metrics = httpx.get(reference_server_tiny.base_url + "/metrics").text
    line = next(x for x in metrics.splitlines() if x.startswith('nv_inference_exec_count{model="servecap-embed"'))
    assert float(line.split()[-1]) >= 1


@pytest.mark.parametrize("body, status, words", [
    ({"input": ""}, 400, "input is empty"),
    ({"input": ["ok", ""]}, 400, "input[1] is empty"),
    ({"input": "x" * 513}, 400, "513 tokens; servecap-embed takes at most 512"),
    ({"input": [1, 2, 300]}, 400, "token ids are bytes"),
    ({"input": ["a"] * 33}, 400, "33 inputs in one request"),
    ({"input": "a", "dimensions": 64}, 400, "gives 128-dimensional"),
    ({"input": "a", "model": "bge-small"}, 404, "does not exist"),
    ({"input": 5}, 400, "input"),
])
def test_bad_embedding_requests_get_a_4xx_naming_the_problem(reference_server_tiny, body, status, words):
    reply = httpx.post(reference_server_tiny.base_url + "/v1/embeddings", json=body, timeout=30)
    assert reply.status_code == status, reply.text
    assert words in reply.json()["error"]["message"]
