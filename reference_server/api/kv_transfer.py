"""The read of a prompt's KV between emulated workers: POST /v1/kv_transfer/release, and the decode side's call.

vLLM's decode worker reads the prompt's blocks from the prefill worker (NIXL) and then notifies it, and
the prefill worker frees them; unread, they are freed after VLLM_NIXL_ABORT_REQUEST_TIMEOUT. Here the
read is that notification alone, over HTTP on loopback: the decode worker asks the prefill worker named
in `kv_transfer_params` to release the request's blocks before it takes the request, so a stale id (never
sent, already read, expired) or a prefill worker that is gone fails the request with a clear error
before any of the decode worker's KV is taken. The transfer's time is charged by the engine
(`reference_server.engine.disaggregation`).
"""

from __future__ import annotations

import time

import httpx
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from reference_server.api.errors import APIError
from reference_server.api.loopback import is_loopback

RELEASE_ROUTE = "/v1/kv_transfer/release"
READ_TIMEOUT_S = 5.0

router = APIRouter(tags=["kv transfer"])


class ReleaseRequest(BaseModel):
    model_config = ConfigDict(strict=True)

    remote_request_id: str
    remote_engine_id: str


@router.post(RELEASE_ROUTE)
async def release(body: ReleaseRequest, request: Request) -> dict:
    """A decode worker has read this request's KV: free its blocks. 404 when none are held for it."""
    runtime = request.app.state.runtime
    engine_id = (runtime.engine.description.get("disaggregation") or {}).get("engine_id")
    if body.remote_engine_id != engine_id:
        raise APIError(404, f"remote_engine_id {body.remote_engine_id!r} is not this worker ({engine_id!r})",
                       code="kv_not_held")
    deadline = runtime.kv_sent.pop(body.remote_request_id, None)
    if deadline is None or deadline < time.monotonic():
        raise APIError(404, f"no KV is held for request {body.remote_request_id!r} (never sent, already read, "
                            "or expired)", code="kv_not_held")
    runtime.engine.abort(body.remote_request_id)   # the engine releases a sent prompt's held blocks
    return {"released": body.remote_request_id}


async def read_remote_kv(params: dict) -> None:
    """Tell the prefill worker in `params` that its KV was read; APIError when it cannot be (400 stale or not
    loopback, 503 the worker unreachable)."""
    host, port = str(params["remote_host"]), params["remote_port"]
    if not is_loopback(host):
        raise APIError(400, f"kv_transfer_params.remote_host {host!r}: an emulated transfer reads from loopback only",
                       param="kv_transfer_params")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise APIError(400, f"kv_transfer_params.remote_port must be a TCP port, got {port!r}",
                       param="kv_transfer_params")
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}{RELEASE_ROUTE}"
    body = {"remote_request_id": str(params["remote_request_id"]), "remote_engine_id": str(params["remote_engine_id"])}
    try:
        async with httpx.AsyncClient(timeout=READ_TIMEOUT_S) as client:
            answer = await client.post(url, json=body)
    except httpx.HTTPError as exc:
        raise APIError(503, f"the prefill worker at {host}:{port} cannot be read ({type(exc).__name__}): "
                            "the prompt's KV is lost", code="kv_transfer_failed") from None
    if answer.status_code == 404:
        raise APIError(400, f"stale kv_transfer_params: the prefill worker at {host}:{port} holds no KV for request "
                            f"{body['remote_request_id']!r}", param="kv_transfer_params", code="kv_not_held")
    if answer.status_code != 200:
        raise APIError(503, f"the prefill worker at {host}:{port} answered HTTP {answer.status_code} to the read",
                       code="kv_transfer_failed")
