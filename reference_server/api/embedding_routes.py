"""OpenAI's embeddings route for the seeded embedding model, through its dynamic batcher.

    POST /v1/embeddings {"model": "servecap-embed", "input": "text" | ["a", "b"] | [ids] | [[ids], ...],
                         "encoding_format": "float" | "base64", "dimensions": D}
    -> {"object": "list", "model": ..., "data": [{"object": "embedding", "index": 0, "embedding": [...]}],
        "usage": {"prompt_tokens": N, "total_tokens": N}}

Text is tokenised as UTF-8 bytes (token ids 0-255). Each input is one row of the batcher, so a
request carries at most the model's max_batch_size inputs. base64 is the little-endian float32
bytes, as OpenAI's client asks for by default. A bad input gets a 400 naming it.
"""

from __future__ import annotations

import base64
import time
from typing import Literal

import numpy as np
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from reference_server.api.errors import APIError
from reference_server.api.v2_inference import infer_batched
from reference_server.api.v2_tensors import V2Error

router = APIRouter(prefix="/v1", tags=["openai"])


class EmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: str | list[str] | list[int] | list[list[int]]
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    user: str | None = None


@router.post("/embeddings")
async def embeddings(body: EmbeddingRequest, request: Request) -> dict:
    received_s = time.monotonic()
    runtime = request.app.state.runtime
    service = runtime.embedding
    if service is None:
        raise APIError(404, "this server serves no embedding model (started with --no-embedding)",
                       param="model", code="model_not_found")
    config = service.config
    if body.model is not None and body.model != config.name:
        raise APIError(404, f"the model {body.model!r} does not exist; this server's embedding model is "
                            f"{config.name!r}", param="model", code="model_not_found")
    if body.dimensions is not None and body.dimensions != config.dim:
        raise APIError(400, f"dimensions: {config.name} gives {config.dim}-dimensional embeddings, got "
                            f"{body.dimensions}", param="dimensions")
    inputs = _token_ids(body.input, config)
    try:
        vectors = await infer_batched(runtime, service, inputs, received_s)
    except V2Error as exc:   # only a full queue or a draining server: the admission's 429/503
        raise exc.api_error from None
    tokens = sum(len(ids) for ids in inputs)
    data = [{"object": "embedding", "index": i, "embedding": _encode(vector, body.encoding_format)}
            for i, vector in enumerate(vectors)]
    return {"object": "list", "model": config.name, "data": data,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def _token_ids(value, config) -> list[np.ndarray]:
    """Each input as byte token ids; APIError(400) naming the input that is empty, too long or out of range."""
    if isinstance(value, str):
        items: list = [value]
    elif value and all(isinstance(v, int) for v in value):
        items = [value]                       # one input given as token ids
    else:
        items = list(value)
    if not items:
        raise APIError(400, "input: give at least one input", param="input")
    if len(items) > config.max_batch_size:
        raise APIError(400, f"input: {len(items)} inputs in one request; {config.name} takes at most "
                            f"{config.max_batch_size} (its max batch size)", param="input")
    out = []
    for index, item in enumerate(items):
        ids = np.frombuffer(item.encode("utf-8"), dtype=np.uint8).astype(np.int64) if isinstance(item, str) \
            else np.asarray(item, dtype=np.int64)
        where = "input" if len(items) == 1 else f"input[{index}]"
        if ids.size == 0:
            raise APIError(400, f"{where} is empty", param="input")
        if ids.size > config.max_input_tokens:
            raise APIError(400, f"{where} has {ids.size} tokens; {config.name} takes at most "
                                f"{config.max_input_tokens}", param="input")
        if ids.min() < 0 or ids.max() > 255:
            raise APIError(400, f"{where}: token ids are bytes (0-255) for {config.name}", param="input")
        out.append(ids)
    return out


def _encode(vector: np.ndarray, encoding: str):
    if encoding == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.astype(np.float32).tolist()
