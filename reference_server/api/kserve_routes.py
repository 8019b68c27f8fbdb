"""KServe V2 (Open Inference Protocol) routes for the classifier, JSON over HTTP.

    POST /v2/models/{name}/infer
      {"id": "r1", "inputs": [{"name": "features", "shape": [2, 16], "datatype": "FP32",
                               "data": [... 32 numbers, flat row-major or nested ...]}]}
    -> {"model_name": "tabular-mlp", "model_version": "1", "id": "r1",
        "outputs": [{"name": "probabilities", "shape": [2, 4], "datatype": "FP32", "data": [...]},
                    {"name": "label", "shape": [2], "datatype": "INT64", "data": [3, 0]}]}

A 1-D input of shape [F] is one row. Errors are KServe's `{"error": "..."}`.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from reference_server.api.errors import APIError

MODEL_VERSION = "1"
INPUT_NAME = "features"
OUTPUT_NAMES = ("probabilities", "label")
ACCEPTED_DATATYPES = {"FP32": np.float32, "FP64": np.float64, "FP16": np.float16,
                      "INT32": np.int32, "INT64": np.int64}

router = APIRouter(prefix="/v2", tags=["kserve-v2"])


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class InferInput(_Strict):
    name: str
    shape: list[int]
    datatype: str
    data: list[Any]
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
    return {"name": "servecap", "version": "0.1.0", "extensions": []}


@router.get("/health/live")
async def server_live() -> dict:
    return {"live": True}


@router.get("/health/ready")
async def server_ready(request: Request) -> dict:
    return {"ready": request.app.state.runtime.ready}


@router.get("/models/{name}")
async def model_metadata(name: str, request: Request) -> dict:
    config = _classifier(request, name).config
    return {
        "name": config.name, "versions": [MODEL_VERSION], "platform": "pytorch",
        "inputs": [{"name": INPUT_NAME, "datatype": "FP32", "shape": [-1, config.num_features]}],
        "outputs": [{"name": "probabilities", "datatype": "FP32", "shape": [-1, config.num_classes]},
                    {"name": "label", "datatype": "INT64", "shape": [-1]}],
        "parameters": {"max_batch_size": config.max_batch_size,
                       "preferred_batch_sizes": list(config.preferred_batch_sizes),
                       "max_queue_delay_us": config.max_queue_delay_us},
    }


@router.get("/models/{name}/ready")
async def model_ready(name: str, request: Request) -> dict:
    _classifier(request, name)
    return {"name": name, "ready": True}


@router.post("/models/{name}/infer")
async def infer(name: str, body: InferRequest, request: Request) -> dict:
    service = _classifier(request, name)
    config = service.config
    rows = _input_rows(body, config.num_features, config.max_batch_size)
    wanted = [o.name for o in body.outputs] if body.outputs else list(OUTPUT_NAMES)
    unknown = [n for n in wanted if n not in OUTPUT_NAMES]
    if unknown:
        raise APIError(400, f"unknown output {unknown[0]!r}; this model has {list(OUTPUT_NAMES)}")
    ticket = service.admission.admit()
    try:
        probs = await service.batcher.infer(rows, on_launch=ticket.started)
    finally:
        ticket.release()
    request.app.state.runtime.metrics.classifier_requests.inc()
    outputs = {
        "probabilities": {"name": "probabilities", "shape": list(probs.shape), "datatype": "FP32",
                          "data": probs.reshape(-1).tolist()},
        "label": {"name": "label", "shape": [probs.shape[0]], "datatype": "INT64",
                  "data": probs.argmax(axis=1).tolist()},
    }
    return {"model_name": config.name, "model_version": MODEL_VERSION,
            "id": body.id or uuid.uuid4().hex, "outputs": [outputs[n] for n in wanted]}


def _classifier(request: Request, name: str):
    service = request.app.state.runtime.classifier
    if service is None or name != service.config.name:
        known = [service.config.name] if service is not None else []
        raise APIError(404, f"unknown model {name!r}; served models: {known}")
    return service


def _input_rows(body: InferRequest, num_features: int, max_batch_size: int) -> np.ndarray:
    """The request's one input as float32 [rows, F]; APIError(400) naming what is wrong."""
    if len(body.inputs) != 1:
        raise APIError(400, f"expected exactly one input {INPUT_NAME!r}, got {len(body.inputs)}")
    tensor = body.inputs[0]
    if tensor.name != INPUT_NAME:
        raise APIError(400, f"unknown input {tensor.name!r}; this model's input is {INPUT_NAME!r}")
    if tensor.datatype not in ACCEPTED_DATATYPES:
        raise APIError(400, f"input datatype {tensor.datatype!r} not supported; use one of "
                            f"{sorted(ACCEPTED_DATATYPES)}")
    shape = tensor.shape
    if len(shape) == 1:
        shape = [1, *shape]
    if len(shape) != 2 or shape[1] != num_features or not 1 <= shape[0] <= max_batch_size:
        raise APIError(400, f"input shape must be [n, {num_features}] (or [{num_features}]) with "
                            f"1 <= n <= {max_batch_size}, got {tensor.shape}")
    try:
        values = np.asarray(tensor.data)   # nested (row-major) or flat; ragged -> error
    except (ValueError, TypeError, OverflowError):
        values = np.asarray([], dtype=object)
    if values.dtype.kind not in "iuf":     # no strings, booleans, nulls or ragged lists
        raise APIError(400, f"input data must be a (nested) list of numbers of datatype {tensor.datatype}")
    values = values.astype(ACCEPTED_DATATYPES[tensor.datatype]).reshape(-1)
    if values.size != shape[0] * shape[1]:
        raise APIError(400, f"input data has {values.size} values but shape {tensor.shape} "
                            f"needs {shape[0] * shape[1]}")
    rows = values.astype(np.float32).reshape(shape)
    if not np.isfinite(rows).all():
        raise APIError(400, "input data must be finite (no NaN or infinity)")
    return rows
