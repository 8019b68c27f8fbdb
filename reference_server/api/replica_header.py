"""The `x-servecap-replica` response header: which replica of a fleet answered.

A router in front of several replicas (vLLM's router, a Kubernetes Service) passes the replica's
response headers back to the client, so the load generator can record the replica that served each
request without asking the router. A pure ASGI middleware: the header goes on every response,
streamed or not, errors included, before its first byte.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = "x-servecap-replica"


class ReplicaHeaderMiddleware:
    def __init__(self, app: ASGIApp, name: str) -> None:
        self.app = app
        self.header = (HEADER.encode(), name.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_named(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), self.header]
            await send(message)

        await self.app(scope, receive, send_named)
