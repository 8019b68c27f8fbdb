"""One inference of a classic model (the classifier, whichever protocol asked: KServe V2 over REST or
gRPC; the embedding model), through its batcher.

Finds the model, admits the request into its queue, waits for its batch and counts it under
Triton's metric names (`runtime.metrics.triton`). Protocol errors leave as `V2Error`, which each
protocol turns into its own status.
"""

from __future__ import annotations

import time

import numpy as np

from reference_server.api.errors import APIError
from reference_server.api.v2_tensors import V2Error


def classifier_service(runtime, name: str):
    """The classifier served as `name`, else V2Error(not_found)."""
    service = runtime.classifier
    if service is None or name != service.config.name:
        known = [service.config.name] if service is not None else []
        raise V2Error(f"unknown model {name!r}; served models: {known}", "not_found")
    return service


async def infer_batched(runtime, service, rows, received_s: float) -> np.ndarray:
    """The model's output for `rows` (probabilities [n, C], embeddings [n, D]), computed in a batch;
    `received_s`: time.monotonic() when the request arrived (the start of Triton's request duration)."""
    metrics = runtime.metrics.triton
    try:
        ticket = service.admission.admit()
    except APIError as exc:
        metrics.failure(service.config.name, "REJECTED")
        raise V2Error(exc.message, "unavailable", api_error=exc) from None
    try:
        probs, timing = await service.batcher.infer(rows, on_launch=ticket.started)
    except Exception:
        metrics.failure(service.config.name, "BACKEND")
        raise
    finally:
        ticket.release()
    metrics.success(service.config.name, timing, time.monotonic() - received_s)
    if service is runtime.classifier:
        runtime.metrics.classifier_requests.inc()
    return probs
