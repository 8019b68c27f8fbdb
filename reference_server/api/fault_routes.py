"""Faults at run time: POST /admin/faults sets one or several, GET /admin/faults lists them (loopback only).

The body is a fault spec (`"errors:status=503,rate=0.5,for=20s"`) or a list of them, as `--fault` takes
them (`reference_server.api.faults`); the answer lists what was set, with each window in unix seconds.
A client that is not on loopback gets 403: faults are for rehearsals on one's own machine.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from reference_server.api.errors import APIError
from reference_server.api.faults import Fault
from reference_server.api.loopback import is_loopback

router = APIRouter(tags=["faults"])


def _loopback_only(request: Request) -> None:
    host = request.client.host if request.client else ""
    if not (is_loopback(host) or host == "testclient"):   # (Starlette's in-process test client)
        raise APIError(403, "faults are set from loopback only", code="forbidden")


@router.get("/admin/faults")
async def list_faults(request: Request) -> dict:
    _loopback_only(request)
    return {"faults": request.app.state.runtime.faults.describe()}


@router.post("/admin/faults")
async def set_faults(request: Request) -> dict:
    _loopback_only(request)
    try:
        body = await request.json()
    except ValueError:
        raise APIError(400, "the body must be a fault spec (a JSON string) or a list of them", param="faults") from None
    specs = body if isinstance(body, list) else [body]
    if not specs or not all(isinstance(spec, str) for spec in specs):
        raise APIError(400, "the body must be a fault spec (a JSON string) or a list of them", param="faults")
    try:
        faults = [Fault.parse(spec) for spec in specs]
    except ValueError as exc:
        raise APIError(400, str(exc).replace("--fault ", "fault "), param="faults") from None
    runtime = request.app.state.runtime
    return {"set": [runtime.set_fault(fault) for fault in faults]}
