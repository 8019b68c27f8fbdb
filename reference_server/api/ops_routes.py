"""Operational routes, always open (no API key): /health, /ready, /metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

router = APIRouter(tags=["ops"])


@router.get("/health")
async def health() -> dict:
    """200 while the process is alive (even while loading or draining)."""
    return {"status": "ok"}


@router.get("/ready", response_model=None)
async def ready(request: Request) -> JSONResponse:
    """200 once weights are loaded and a warm-up pass ran; 503 before, and while draining."""
    runtime = request.app.state.runtime
    if runtime.failed:
        return JSONResponse({"status": "failed", "reason": runtime.failed}, status_code=503)
    if runtime.draining:
        return JSONResponse({"status": "draining"}, status_code=503)
    if not runtime.ready:
        return JSONResponse({"status": "loading"}, status_code=503)
    return JSONResponse({"status": "ready"})


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    """Prometheus text exposition of this app's registry."""
    body, content_type = request.app.state.runtime.metrics.render()
    return Response(body, media_type=content_type)
