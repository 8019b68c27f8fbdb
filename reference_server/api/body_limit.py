"""Request-body size limit: 413 with the surface's error JSON, before the body is parsed.

A declared `Content-Length` over the limit is refused without reading the body; a
chunked body is counted as it arrives and refused as soon as it passes the limit.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reference_server.api.errors import error_response


class BodyTooLarge(HTTPException):
    """Raised from `receive` mid-body; FastAPI re-raises HTTPExceptions as they are, so the
    app's error handler turns it into a 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body exceeds the {limit}-byte limit (--max-body-bytes)")


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body_bytes):
            problem = (f"request body of {declared} bytes exceeds the {self.max_body_bytes}-byte limit "
                       "(--max-body-bytes)") if declared.isdigit() else "invalid Content-Length header"
            await error_response(request, 413 if declared.isdigit() else 400, problem)(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise BodyTooLarge(self.max_body_bytes)
            return message

        await self.app(scope, limited_receive, send)
