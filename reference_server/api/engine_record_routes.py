"""The engine's step and request records, for pollers: GET /v1/engine/steps and /v1/engine/requests.

Shapes in `contract.engine_record`; the rows come from the runtime's `EngineRecordLog`.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request

from contract.engine_record import MAX_ROWS_PER_POLL, REQUESTS_ROUTE, STEPS_ROUTE

router = APIRouter(tags=["engine"])

AFTER = Query(0, ge=0, description="the last seq already read (0: from the oldest held)")
LIMIT = Query(MAX_ROWS_PER_POLL, ge=1, le=MAX_ROWS_PER_POLL, description="most rows in one answer")


@router.get(STEPS_ROUTE)
async def engine_steps(request: Request, after: int = AFTER, limit: int = LIMIT) -> dict:
    """One row per engine step after `after`: start, duration, batch shape, queue after it."""
    return request.app.state.runtime.record_log.steps.after(after, limit)


@router.get(REQUESTS_ROUTE)
async def engine_requests(request: Request, after: int = AFTER, limit: int = LIMIT) -> dict:
    """One row per finished request after `after`: engine arrival, first scheduled, first token, finish."""
    return request.app.state.runtime.record_log.requests.after(after, limit)
