"""Stamp every HTTP response with the serving instance's id and version.

A plain ASGI middleware (not Starlette's `BaseHTTPMiddleware`, which would
buffer server-sent events) so a client or test can see where each hop landed.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mrtr_protocol.instance import WORKER_ID_HEADER, WORKER_VERSION_HEADER


class InstanceHeaders:
    def __init__(self, app: ASGIApp, *, instance_id: str, version: int) -> None:
        self._app = app
        self._headers = [
            (WORKER_ID_HEADER.lower().encode(), instance_id.encode()),
            (WORKER_VERSION_HEADER.lower().encode(), str(version).encode()),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *self._headers]
            await send(message)

        await self._app(scope, receive, send_with_headers)
