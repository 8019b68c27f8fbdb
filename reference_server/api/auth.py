"""Bearer-token auth for /v1 and /v2 (health, ready and metrics stay open).

A pure ASGI middleware rather than a route dependency, so the key is checked before
the body is read or parsed: without the key, even malformed JSON gets 401.
"""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from reference_server.api.errors import error_response

PROTECTED_PREFIXES = ("/v1", "/v2")


class ApiKeyMiddleware:
    """401 (OpenAI or KServe error JSON) unless `Authorization: Bearer <api_key>` matches."""

    def __init__(self, app: ASGIApp, api_key: str | None) -> None:
        self.app = app
        self.api_key = api_key.encode() if api_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.api_key is None or scope["type"] != "http" or not _protected(scope["path"]):
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        problem = self._problem(request.headers.get("authorization", ""))
        if problem is None:
            await self.app(scope, receive, send)
            return
        response = error_response(request, 401, problem, code="invalid_api_key",
                                  headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)

    def _problem(self, header: str) -> str | None:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return "missing API key: send 'Authorization: Bearer <key>'"
        if not secrets.compare_digest(token.strip().encode(), self.api_key):
            return "incorrect API key"
        return None


def _protected(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in PROTECTED_PREFIXES)
