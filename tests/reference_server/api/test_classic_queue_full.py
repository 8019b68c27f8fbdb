"""The classifier's full queue: over REST the admission's own 429 with its Retry-After, over gRPC
UNAVAILABLE with the same message."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
from tritonclient.utils import InferenceServerException

from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec

pytestmark = pytest.mark.slow


def test_a_full_queue_answers_429_with_retry_after_and_grpc_unavailable():
    spec = ReferenceServerSpec.from_flags(["--model", "tiny", "--engine-mode", "thread", "--grpc-port", "0",
                                           "--classifier-max-waiting", "0", "--retry-after-s", "3"])
    with ServerProcess(spec) as server:
        body = {"inputs": [{"name": "features", "shape": [1, 16], "datatype": "FP32", "data": [0.0] * 16}]}
        reply = httpx.post(server.base_url + "/v2/models/tabular-mlp/infer", json=body, timeout=30)
        assert reply.status_code == 429 and reply.headers["retry-after"] == "3"
        assert "server overloaded" in reply.json()["error"]
        client = triton_grpc.InferenceServerClient(server.grpc_target)
        tensor = triton_grpc.InferInput("features", [1, 16], "FP32")
        tensor.set_data_from_numpy(np.zeros((1, 16), np.float32))
        with pytest.raises(InferenceServerException) as caught:
            client.infer("tabular-mlp", [tensor])
        assert caught.value.status() == "StatusCode.UNAVAILABLE" and "server overloaded" in caught.value.message()
        client.close()
