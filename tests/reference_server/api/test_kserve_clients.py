"""KServe V2 against the reference server with the official clients, `tritonclient.http` and
`tritonclient.grpc`: metadata, inference (binary and JSON tensors), and each bad input's status."""

from __future__ import annotations

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from contract.open_inference import open_inference_pb2 as pb
from reference_server.classifier.model import ClassifierConfig, TabularClassifier

pytestmark = pytest.mark.slow

NAME, FEATURES, CLASSES = "iris-like", 6, 3   # the shared server's classifier (conftest)
EXPECTED_MODEL = TabularClassifier.from_config(ClassifierConfig(num_features=FEATURES, num_classes=CLASSES, seed=7))
ROWS = np.random.default_rng(3).normal(size=(4, FEATURES)).astype(np.float32)   # 4: a preferred size, no wait


@pytest.fixture(scope="module")
def clients(reference_server_tiny):
    http_target = reference_server_tiny.base_url.removeprefix("http://")
    assert reference_server_tiny.grpc_target, "the server's ready line names no gRPC port"
    http_client = triton_http.InferenceServerClient(http_target, network_timeout=30)
    grpc_client = triton_grpc.InferenceServerClient(reference_server_tiny.grpc_target)
    yield {"http": (triton_http, http_client), "grpc": (triton_grpc, grpc_client)}
    http_client.close()
    grpc_client.close()


def infer_input(module, rows: np.ndarray, *, name="features", datatype="FP32", binary=True):
    tensor = module.InferInput(name, list(rows.shape), datatype)
    if module is triton_http:
        tensor.set_data_from_numpy(rows, binary_data=binary)
    else:
        tensor.set_data_from_numpy(rows)
    return tensor


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_health_and_metadata(clients, protocol):
    module, client = clients[protocol]
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready(NAME)
    meta = client.get_model_metadata(NAME, as_json=True) if protocol == "grpc" else client.get_model_metadata(NAME)
    assert meta["name"] == NAME and meta["versions"] == ["1"]
    assert [(t["name"], t["datatype"], [int(d) for d in t["shape"]]) for t in meta["inputs"]] == \
        [("features", "FP32", [-1, FEATURES])]
    assert [(t["name"], t["datatype"]) for t in meta["outputs"]] == [("probabilities", "FP32"), ("label", "INT64")]


@pytest.mark.parametrize("protocol, binary", [("http", True), ("http", False), ("grpc", True)])
def test_infer_returns_the_seeded_models_outputs(clients, protocol, binary):
    module, client = clients[protocol]
    result = client.infer(NAME, [infer_input(module, ROWS, binary=binary)], request_id="r-42")
    expected = EXPECTED_MODEL.predict(ROWS)
    np.testing.assert_allclose(result.as_numpy("probabilities"), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(result.as_numpy("label"), expected.argmax(axis=1))
    assert result.get_response()["id"] if protocol == "http" else result.get_response().id == "r-42"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_requested_output_alone(clients, protocol):
    module, client = clients[protocol]
    result = client.infer(NAME, [infer_input(module, ROWS)], outputs=[module.InferRequestedOutput("label")])
    np.testing.assert_array_equal(result.as_numpy("label"), EXPECTED_MODEL.predict(ROWS).argmax(axis=1))
    assert result.as_numpy("probabilities") is None


BAD_INPUTS = [
    (lambda m: infer_input(m, np.zeros((4, FEATURES + 1), np.float32)), "input shape must be [n, 6]"),
    (lambda m: infer_input(m, np.zeros((9, FEATURES), np.float32)), "1..8 rows (max_batch_size), got 9"),
    (lambda m: infer_input(m, np.zeros((4, FEATURES), np.float32), name="pixels"), "unknown input 'pixels'"),
    (lambda m: infer_input(m, np.zeros((4, FEATURES), np.bool_), datatype="BOOL"), "datatype 'BOOL' not supported"),
]


@pytest.mark.parametrize("protocol, status", [("http", "400"), ("grpc", "StatusCode.INVALID_ARGUMENT")])
@pytest.mark.parametrize("make_input, words", BAD_INPUTS)
def test_bad_tensors_get_the_protocols_status_naming_the_problem(clients, protocol, status, make_input, words):
    module, client = clients[protocol]
    with pytest.raises(InferenceServerException) as caught:
        client.infer(NAME, [make_input(module)])
    assert caught.value.status() == status and words in caught.value.message()


@pytest.mark.parametrize("protocol, status", [("http", "400"), ("grpc", "StatusCode.INVALID_ARGUMENT")])
def test_a_missing_input_gets_the_protocols_status(clients, protocol, status):
    module, client = clients[protocol]
    with pytest.raises(InferenceServerException) as caught:
        client.infer(NAME, [])
    assert caught.value.status() == status
    assert ("expected exactly one input" if protocol == "grpc" else "inputs") in caught.value.message()


@pytest.mark.parametrize("protocol, status", [("http", "404"), ("grpc", "StatusCode.NOT_FOUND")])
def test_an_unknown_model_gets_not_found(clients, protocol, status):
    module, client = clients[protocol]
    with pytest.raises(InferenceServerException) as caught:
        client.infer("no-such-model", [infer_input(module, ROWS)])
    assert caught.value.status() == status and "unknown model 'no-such-model'" in caught.value.message()


def test_grpc_typed_contents_and_an_unparseable_protobuf(reference_server_tiny):
    """Inputs as typed contents (not raw) are served the same; bytes that are no ModelInferRequest get
    INVALID_ARGUMENT naming the message type, and the connection keeps serving."""
    with grpc.insecure_channel(reference_server_tiny.grpc_target) as channel:
        infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                    request_serializer=lambda m: m.SerializeToString() if hasattr(m, "SerializeToString") else m,
                                    response_deserializer=pb.ModelInferResponse.FromString)
        request = pb.ModelInferRequest(model_name=NAME)
        request.inputs.add(name="features", datatype="FP32", shape=list(ROWS.shape)).contents.fp32_contents.extend(
            ROWS.reshape(-1).tolist())
        reply = infer(request, timeout=30)
        probs = np.frombuffer(reply.raw_output_contents[0], dtype="<f4").reshape(list(reply.outputs[0].shape))
        np.testing.assert_allclose(probs, EXPECTED_MODEL.predict(ROWS), rtol=1e-5, atol=1e-6)
        with pytest.raises(grpc.RpcError) as caught:
            infer(b"\x08\x96\x01not a protobuf\xff\xff", timeout=30)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "not a valid inference.ModelInferRequest protobuf" in caught.value.details()
        assert infer(request, timeout=30).outputs[0].name == "probabilities"


def test_triton_metrics_split_each_request_into_queue_and_compute(reference_server_tiny, clients):
    module, client = clients["http"]
    def scrape() -> dict[str, float]:
        text = httpx.get(reference_server_tiny.base_url + "/metrics").text
        return {line.split("{")[0]: float(line.split()[-1]) for line in text.splitlines()
                if line.startswith("nv_inference_") and f'model="{NAME}"' in line and "reason" not in line}
    before = scrape()
    client.infer(NAME, [infer_input(module, ROWS)])
    after = scrape()
    delta = {name: after[name] - before.get(name, 0.0) for name in after}
    assert delta["nv_inference_request_success"] == 1 and delta["nv_inference_count"] == 4
    assert delta["nv_inference_exec_count"] == 1
    compute = sum(delta[f"nv_inference_compute_{part}_duration_us"] for part in ("input", "infer", "output"))
    assert delta["nv_inference_compute_infer_duration_us"] > 0
    assert delta["nv_inference_queue_duration_us"] + compute <= delta["nv_inference_request_duration_us"] + 2
