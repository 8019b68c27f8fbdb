"""contract/open_inference: the committed module is what its .proto compiles to, and it speaks the
protocol's field numbers (what a V2 peer that never saw our .proto reads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.open_inference import open_inference_pb2 as pb
from contract.ready_line import ready_grpc, ready_line

HERE = Path(__file__).resolve().parents[2] / "contract" / "open_inference"


def test_the_committed_module_is_the_protos_compilation(tmp_path):
    protoc = pytest.importorskip("grpc_tools.protoc")
    assert protoc.main(["protoc", f"-I{HERE}", f"--python_out={tmp_path}", str(HERE / "open_inference.proto")]) == 0
    assert (tmp_path / "open_inference_pb2.py").read_text() == (HERE / "open_inference_pb2.py").read_text(), \
        "contract/open_inference_pb2.py is stale: regenerate it (the command is in the .proto)"


def test_infer_request_uses_the_protocols_field_numbers():
    fields = {f.name: f.number for f in pb.ModelInferRequest.DESCRIPTOR.fields}
    assert fields == {"model_name": 1, "model_version": 2, "id": 3, "parameters": 4, "inputs": 5, "outputs": 6,
                      "raw_input_contents": 7}
    tensor = {f.name: f.number for f in pb.ModelInferRequest.InferInputTensor.DESCRIPTOR.fields}
    assert tensor == {"name": 1, "datatype": 2, "shape": 3, "parameters": 4, "contents": 5}
    reply = {f.name: f.number for f in pb.ModelInferResponse.DESCRIPTOR.fields}
    assert reply["outputs"] == 5 and reply["raw_output_contents"] == 6
    # hand-encoded: field 1 (model_name) = "m", field 7 (raw_input_contents) = b"\x01"
    parsed = pb.ModelInferRequest.FromString(b"\x0a\x01m\x3a\x01\x01")
    assert parsed.model_name == "m" and list(parsed.raw_input_contents) == [b"\x01"]


def test_the_ready_line_names_the_grpc_port():
    assert ready_grpc(ready_line("http://127.0.0.1:8000", model="tiny", grpc="127.0.0.1:8001")) == "127.0.0.1:8001"
    assert ready_grpc(ready_line("http://127.0.0.1:8000", model="tiny")) is None
