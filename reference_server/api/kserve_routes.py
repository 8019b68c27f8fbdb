"""KServe V2 (Open Inference Protocol) routes for the classifier over HTTP: JSON, and Triton's
binary tensor data extension (what `tritonclient.http` sends by default).

    POST /v2/models/{name}/infer
      {"id": "r1", "inputs": [{"name": "features", "shape": [2, 16], "datatype": "FP32",
                               "data": [... 32 numbers, flat row-major or nested ...]}]}
    -> {"model_name": "tabular-mlp", "model_version": "1", "id": "r1",
        "outputs": [{"name": "probabilities", "shape": [2, 4], "datatype": "FP32", "data": [...]},
                    {"name": "label", "shape": [2], "datatype": "INT64", "data": [3, 0]}]}

Binary extension: with the header `Inference-Header-Content-Length: N`, the body's first N bytes
are the JSON above and the rest the inputs' raw little-endian bytes, in input order, each input
giving its size as `parameters.binary_data_size` instead of `data`. Outputs come back the same way
(the same header, `parameters.binary_data_size` per output) when the request asks with
`parameters.binary_data_output: true`, or per output with `parameters.binary_data: true`.

A 1-D input of shape [F] is one row. Errors are KServe's `{"error": "..."}`: 400 for a malformed
request or tensor, 404 for an unknown model, 429/503 when the queue is full or the server drains.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reference_server.api.errors import APIError, describe_validation_errors
from reference_server.api.v2_inference import classifier_service, infer_batched
from reference_server.api.v2_tensors import (
    MODEL_VERSION,
    OutputTensor,
    V2Error,
    check_output_names,
    classifier_outputs,
    elements_from_raw,
    elements_from_values,
    input_rows,
    model_metadata,
)

HEADER_LENGTH = "inference-header-content-length"
router = APIRouter(prefix="/v2", tags=["kserve-v2"])


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class InferInput(_Strict):
    name: str
    shape: list[int]
    datatype: str
    data: list[Any] | None = None         # None: its bytes follow the JSON (binary extension)
    parameters: dict[str, Any] | None = None


class RequestedOutput(_Strict):
    name: str
    parameters: dict[str, Any] | None = None


class InferRequest(_Strict):
    id: str | None = None
    inputs: list[InferInput] = Field(..., min_length=1)
    outputs: list[RequestedOutput] | None = None
    parameters: dict[str, Any] | None = None


@router.get("")
async def server_metadata() -> dict:
    return {"name": "servecap", "version": "0.1.0", "extensions": ["binary_tensor_data"]}


@router.get("/health/live")
async def server_live() -> dict:
    return {"live": True}


@router.get("/health/ready")
async def server_ready(request: Request) -> dict:
    return {"ready": request.app.state.runtime.ready}


@router.get("/models/{name}")
async def model_metadata_route(name: str, request: Request) -> dict:
    return model_metadata(_service(request, name).config)


@router.get("/models/{name}/ready")
async def model_ready(name: str, request: Request) -> dict:
    _service(request, name)
    return {"name": name, "ready": True}


@router.post("/models/{name}/infer")
async def infer(name: str, request: Request) -> Response:
    received_s = time.monotonic()
    runtime = request.app.state.runtime
    service = _service(request, name)
    body, binary = _split_body(await request.body(), request.headers.get(HEADER_LENGTH))
    config = service.config
    try:
        rows = _rows(body, binary, config)
        wanted = [o.name for o in body.outputs] if body.outputs else None
        check_output_names(wanted)   # an unknown output fails before the queue
        probs = await infer_batched(runtime, service, rows, received_s)
        outputs = classifier_outputs(probs, wanted)
    except V2Error as exc:
        raise _api_error(exc) from None
    return _response(config.name, body, outputs)


def _service(request: Request, name: str):
    try:
        return classifier_service(request.app.state.runtime, name)
    except V2Error as exc:
        raise _api_error(exc) from None


def _api_error(exc: V2Error) -> APIError:
    if exc.kind == "not_found":
        return APIError(404, str(exc))
    if exc.api_error is not None:   # the admission's 429/503, its Retry-After kept
        return exc.api_error
    return APIError(400, str(exc))


def _split_body(raw: bytes, header_length: str | None) -> tuple[InferRequest, bytes]:
    """(the JSON request, the binary bytes after it) — APIError(400) naming what is wrong."""
    json_bytes, binary = raw, b""
    if header_length is not None:
        try:
            length = int(header_length)
        except ValueError:
            length = -1
        if not 0 <= length <= len(raw):
            raise APIError(400, f"Inference-Header-Content-Length must be a byte count within the body's "
                                f"{len(raw)} bytes, got {header_length!r}")
        json_bytes, binary = raw[:length], raw[length:]
    try:
        return InferRequest.model_validate_json(json_bytes), binary
    except ValidationError as exc:
        message, _ = describe_validation_errors(exc.errors())
        raise APIError(400, message) from None


def _rows(body: InferRequest, binary: bytes, config):
    if len(body.inputs) != 1:
        raise V2Error(f"expected exactly one input 'features', got {len(body.inputs)}")
    tensor = body.inputs[0]
    size = (tensor.parameters or {}).get("binary_data_size")
    if size is not None:
        if tensor.data is not None:
            raise V2Error(f"input {tensor.name!r} gives both data and binary_data_size")
        if not isinstance(size, int) or isinstance(size, bool) or size != len(binary):
            raise V2Error(f"input {tensor.name!r} binary_data_size {size!r} does not match the "
                          f"{len(binary)} bytes after the JSON header")
        elements = elements_from_raw(tensor.datatype, tensor.shape, binary, f"input {tensor.name!r}")
    elif tensor.data is None:
        raise V2Error(f"input {tensor.name!r} has no data (and no parameters.binary_data_size)")
    else:
        if binary:
            raise V2Error(f"{len(binary)} bytes follow the JSON header but no input has binary_data_size")
        elements = elements_from_values(tensor.datatype, tensor.data)
    return input_rows(tensor.name, tensor.datatype, tensor.shape, elements,
                      num_features=config.num_features, max_batch_size=config.max_batch_size)


def _response(model: str, body: InferRequest, outputs: list[OutputTensor]) -> Response:
    binary_all = bool((body.parameters or {}).get("binary_data_output"))
    asked = {o.name: bool((o.parameters or {}).get("binary_data", binary_all)) for o in body.outputs or []}
    header = {"model_name": model, "model_version": MODEL_VERSION, "id": body.id or uuid.uuid4().hex, "outputs": []}
    blobs = []
    for output in outputs:
        entry: dict = {"name": output.name, "datatype": output.datatype, "shape": output.shape}
        if asked.get(output.name, binary_all):
            blob = output.array.tobytes()
            entry["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            entry["data"] = output.array.reshape(-1).tolist()
        header["outputs"].append(entry)
    if not blobs:
        return JSONResponse(header)
    head = json.dumps(header, separators=(",", ":")).encode()
    return Response(head + b"".join(blobs), media_type="application/octet-stream",
                    headers={"Inference-Header-Content-Length": str(len(head))})
