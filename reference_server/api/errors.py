"""Error responses: OpenAI's error JSON on `/v1`, KServe's on `/v2`, never a traceback.

OpenAI shape (what the `openai` client parses into `APIStatusError.body`):
    {"error": {"message": "...", "type": "invalid_request_error", "param": "max_tokens", "code": null}}
KServe V2 shape (`/v2/...` routes):
    {"error": "..."}

Every error response also counts in `servecap_requests_rejected_total{reason=...}`.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from reference_server.runtime import metrics as metric_names

logger = logging.getLogger("reference_server.api")

# HTTP status -> OpenAI error type
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "service_unavailable_error",
}
_REJECT_REASONS = {401: metric_names.REJECT_UNAUTHORIZED, 429: metric_names.REJECT_QUEUE_FULL,
                   503: metric_names.REJECT_DRAINING}


class APIError(Exception):
    """Raise anywhere in a route to answer `status` with a clear message."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}


def error_response(request: Request, status: int, message: str, *, param: str | None = None,
                   code: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    """The error JSON for the surface `request` is on, and the rejection counted."""
    app_metrics = getattr(request.app.state, "metrics", None)
    if app_metrics is not None:
        app_metrics.reject(metric_names.REJECT_INJECTED if code == "injected_fault" else
                           _REJECT_REASONS.get(status, metric_names.REJECT_INVALID if status < 500 else "error"))
    if request.url.path.startswith("/v2"):
        body: dict = {"error": message}
    else:
        body = {"error": {"message": message, "type": _ERROR_TYPES.get(status, "invalid_request_error"),
                          "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def describe_validation_errors(errors) -> tuple[str, str | None]:
    """Pydantic errors -> ("body.max_tokens: Input should be greater than 0; ...", "max_tokens")."""
    parts, param = [], None
    for error in errors:
        loc = [str(p) for p in error.get("loc", ()) if p != "body"]
        # pydantic puts the union branch in loc (e.g. "str", "list[int]"); keep field names only
        where = ".".join(loc) or "body"
        if error.get("type") == "json_invalid":
            return f"request body is not valid JSON: {error.get('ctx', {}).get('error', error.get('msg'))}", None
        if not loc and error.get("type") in ("missing", "model_attributes_type", "dict_type", "model_type"):
            return "request body must be a JSON object (Content-Type: application/json)", None
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
        if param is None and loc:
            param = loc[0]
    # unions repeat one problem per branch; keep each message once, in order
    unique = list(dict.fromkeys(parts))
    message = "; ".join(unique[:5]) + (f"; ... ({len(unique) - 5} more)" if len(unique) > 5 else "")
    return message or "invalid request", param


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return error_response(request, exc.status, exc.message, param=exc.param, code=exc.code,
                              headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = describe_validation_errors(exc.errors())
        return error_response(request, 400, message, param=param)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route {request.method} {request.url.path}"
        elif exc.status_code == 405:
            detail = f"method {request.method} not allowed on {request.url.path}"
        return error_response(request, exc.status_code, detail, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(request, 500, f"internal error: {type(exc).__name__}: {exc}")
