"""KServe V2 classifier routes and their Triton-style dynamic batcher, against a live server."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest

from reference_server.classifier.model import ClassifierConfig, TabularClassifier

pytestmark = pytest.mark.slow

NAME = "iris-like"
FEATURES, CLASSES = 6, 3
# the same seed builds the same model in this process
EXPECTED_MODEL = TabularClassifier.from_config(ClassifierConfig(num_features=FEATURES, num_classes=CLASSES, seed=7))


@pytest.fixture(scope="module")
def server(reference_server_tiny):
    return reference_server_tiny   # classifier: NAME, FEATURES -> CLASSES, preferred 4,8, 1 s delay (conftest)


def infer_body(rows: np.ndarray, **extra) -> dict:
    return {"inputs": [{"name": "features", "shape": list(rows.shape), "datatype": "FP32",
                        "data": rows.reshape(-1).tolist()}], **extra}


def metric(base_url: str, name: str) -> float:
    text = httpx.get(base_url + "/metrics").text
    return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")))


def test_metadata_describes_inputs_outputs_and_batching(server):
    meta = httpx.get(f"{server.base_url}/v2/models/{NAME}").json()
    assert meta["name"] == NAME and meta["versions"] == ["1"]
    assert meta["inputs"] == [{"name": "features", "datatype": "FP32", "shape": [-1, FEATURES]}]
    assert [o["name"] for o in meta["outputs"]] == ["probabilities", "label"]
    assert meta["parameters"] == {"max_batch_size": 8, "preferred_batch_sizes": [4, 8], "max_queue_delay_us": 1000000,
                                  "dynamic_batching": True, "instances": 1}
    assert httpx.get(f"{server.base_url}/v2/models/{NAME}/ready").json()["ready"] is True


def test_infer_returns_the_seeded_models_probabilities(server):
    rows = np.random.default_rng(0).normal(size=(3, FEATURES)).astype(np.float32)
    response = httpx.post(f"{server.base_url}/v2/models/{NAME}/infer", json=infer_body(rows, id="req-1"), timeout=30)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model_name"] == NAME and body["id"] == "req-1"
    probs_out, label_out = body["outputs"]
    assert probs_out["shape"] == [3, CLASSES] and probs_out["datatype"] == "FP32"
    probs = np.asarray(probs_out["data"]).reshape(3, CLASSES)
    expected = EXPECTED_MODEL.predict(rows)
    np.testing.assert_allclose(probs, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert label_out == {"name": "label", "shape": [3], "datatype": "INT64", "data": expected.argmax(1).tolist()}


def test_nested_data_one_row_and_requested_outputs(server):
    row = [[0.5] * FEATURES]
    body = {"inputs": [{"name": "features", "shape": [FEATURES], "datatype": "FP64", "data": row}],
            "outputs": [{"name": "label"}]}
    response = httpx.post(f"{server.base_url}/v2/models/{NAME}/infer", json=body, timeout=30).json()
    assert [o["name"] for o in response["outputs"]] == ["label"] and response["outputs"][0]["shape"] == [1]


@pytest.mark.parametrize("tensor, words", [
    ({"name": "features", "shape": [2, FEATURES], "datatype": "FP32", "data": [1.0] * FEATURES}, "needs"),
    ({"name": "features", "shape": [1, FEATURES + 1], "datatype": "FP32", "data": [1.0] * (FEATURES + 1)}, "shape"),
    ({"name": "features", "shape": [9, FEATURES], "datatype": "FP32", "data": [1.0] * 9 * FEATURES}, "1..8 rows (max_batch_size)"),
    ({"name": "pixels", "shape": [1, FEATURES], "datatype": "FP32", "data": [1.0] * FEATURES}, "unknown input"),
    ({"name": "features", "shape": [1, FEATURES], "datatype": "BYTES", "data": ["a"] * FEATURES}, "datatype"),
    ({"name": "features", "shape": [1, FEATURES], "datatype": "FP32", "data": ["1"] * FEATURES}, "numbers"),
    ({"name": "features", "shape": [1, FEATURES], "datatype": "FP16", "data": [1e9] * FEATURES}, "finite"),
])
def test_bad_tensors_get_400_with_kserve_error(server, tensor, words):
    response = httpx.post(f"{server.base_url}/v2/models/{NAME}/infer", json={"inputs": [tensor]}, timeout=30)
    assert response.status_code == 400, response.text
    assert words in response.json()["error"]


def test_unknown_model_gets_404(server):
    rows = np.zeros((1, FEATURES), np.float32)
    response = httpx.post(f"{server.base_url}/v2/models/nope/infer", json=infer_body(rows), timeout=30)
    assert response.status_code == 404 and NAME in response.json()["error"]
    assert httpx.get(f"{server.base_url}/v2/models/nope").status_code == 404


def test_concurrent_requests_are_batched_at_preferred_sizes(server):
    batches_before = metric(server.base_url, "servecap_classifier_batch_size_count")
    rows_before = metric(server.base_url, "servecap_classifier_batch_size_sum")

    async def send_all() -> list[int]:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as client:
            bodies = [infer_body(np.full((1, FEATURES), i, np.float32)) for i in range(8)]
            responses = await asyncio.gather(*(client.post(f"/v2/models/{NAME}/infer", json=b) for b in bodies))
        for i, response in enumerate(responses):   # each answer is its own row's, not a neighbour's
            expected = EXPECTED_MODEL.predict(np.full((1, FEATURES), i, np.float32))
            np.testing.assert_allclose(response.json()["outputs"][0]["data"], expected.ravel(), rtol=1e-5)
        return [r.status_code for r in responses]

    assert asyncio.run(send_all()) == [200] * 8
    assert metric(server.base_url, "servecap_classifier_batch_size_sum") - rows_before == 8
    # 8 single-row requests within the 1 s queue delay launch as batches of 4 or 8, not 8 batches of 1
    assert metric(server.base_url, "servecap_classifier_batch_size_count") - batches_before <= 2
