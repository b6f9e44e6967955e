"""The request body limit of `/mcp`, answered as JSON-RPC: HTTP 413 with an error that names the limit.

The SDK's own limit (`RequestBodyLimitMiddleware`) answers 413 in plain text, and only on the
manager's path: the quiet tools' JSON path calls the SDK's handler directly, which read any body
whole. This limit stands in front of every `/mcp` path, so every body is bounded the same way and
refused in the shape a JSON-RPC client reads: `-32600` with `data: {"limit": "bodyBytes", "max"}`
(and `got`, the declared length, when the client declared one). A declared length past the limit is
refused before a byte of the body is read; otherwise the body is counted as it arrives.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

INVALID_REQUEST = -32600
_CONTENT_LENGTH = b"content-length"


class BodyLimit:
    """Refuse a body larger than `max_bytes` with 413; pass the rest on, the body already read replayed."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self._app = app
        self._max = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = next((value for name, value in scope["headers"] if name == _CONTENT_LENGTH), None)
        if declared is not None and declared.isdigit() and int(declared) > self._max:
            await self._refuse(send, int(declared))
            return
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self._max:
                await self._refuse(send, None)
                return
            if not message.get("more_body", False):
                break
        if len(messages) > 1 and messages[-1]["type"] == "http.request":
            body = b"".join(m.get("body", b"") for m in messages)
            messages = [{"type": "http.request", "body": body, "more_body": False}]
        await self._app(scope, _replay(messages, receive), send)

    async def _refuse(self, send: Send, declared: int | None) -> None:
        data: dict[str, object] = {"limit": "bodyBytes", "max": self._max}
        if declared is None:
            message = f"request body too large: more than {self._max} bytes"
        else:
            message = f"request body too large: {declared} bytes (at most {self._max})"
            data["got"] = declared
        error = {"code": INVALID_REQUEST, "message": message, "data": data}
        payload = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A receive that gives the messages already read, in order, then the real receive's (a disconnect)."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
