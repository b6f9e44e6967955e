"""Keep `/mcp` on the 2026-07-28 wire only.

The SDK's HTTP manager serves two eras: requests that carry a modern
`MCP-Protocol-Version` go to the stateless per-request handler, and anything
else falls through to the legacy (2025) transport, which opens GET streams
and accepts `initialize`. This fleet is stateless by design and speaks only
2026-07-28, so the edge answers the legacy shapes itself:

* GET and DELETE on `/mcp` (legacy stream and session teardown): 405;
* a POST without `MCP-Protocol-Version`: 400 with `-32020` (the header is
  required), naming the supported version.

The error body carries no `id`: the body is deliberately not parsed here.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from mrtr_protocol.wire import PROTOCOL_VERSION

MCP_PATH = "/mcp"
HEADER_MISMATCH = -32020


class ModernOnly:
    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != MCP_PATH:
            await self._app(scope, receive, send)
            return
        method = scope["method"]
        if method in ("GET", "DELETE"):
            await _reply(send, 405, {"error": "this endpoint takes POST only (MCP 2026-07-28)"}, allow=True)
            return
        if method == "POST" and not any(name == b"mcp-protocol-version" for name, _ in scope["headers"]):
            error = {
                "code": HEADER_MISMATCH,
                "message": f"MCP-Protocol-Version header required; this server speaks {PROTOCOL_VERSION}",
                "data": {"supported": [PROTOCOL_VERSION]},
            }
            await _reply(send, 400, {"jsonrpc": "2.0", "error": error})
            return
        await self._app(scope, receive, send)


async def _reply(send: Send, status: int, body: dict[str, object], *, allow: bool = False) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    if allow:
        headers.append((b"allow", b"POST"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
