"""Keep `/mcp` on the 2026-07-28 wire only.

The SDK's HTTP manager serves two eras: requests that carry a modern
`MCP-Protocol-Version` go to the stateless per-request handler, and anything
else falls through to the legacy (2025) transport, which opens GET streams
and accepts `initialize`. This fleet is stateless by design and speaks only
2026-07-28, so the edge answers the legacy shapes itself:

* GET and DELETE on `/mcp` (legacy stream and session teardown): 405;
* a POST without `MCP-Protocol-Version`: 400 with `-32020` (the header is
  required), naming the supported version;
* a POST naming a 2025-era (initialize handshake) version: 400 with `-32022`
  (unsupported protocol version) and `data: {supported, requested}`, the
  answer the 2026-07-28 spec gives any version a server does not serve.

Why refuse 2025 clients rather than serve them stateless: that wire has no
`input_required`, so nothing this fleet does across instances works there.
Tools that ask could only fail, and a computation could not be handed back:
it would pin a slot to its end and hold up a drain. Serving a few tools
half-way would leave a client guessing which ones; one refusal at the edge,
the same for every tool, prompt and resource, tells it plainly to speak
2026-07-28 (a dual-era client retries with it).

The error bodies carry no `id`: the body is deliberately not parsed here.
"""

from __future__ import annotations

import json

from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Scope, Send

from mrtr_protocol.wire import PROTOCOL_VERSION

MCP_PATH = "/mcp"
HEADER_MISMATCH = -32020
_VERSION_HEADER = b"mcp-protocol-version"


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
        if method == "POST":
            version = next((value for name, value in scope["headers"] if name == _VERSION_HEADER), None)
            if version is None:
                error = {
                    "code": HEADER_MISMATCH,
                    "message": f"MCP-Protocol-Version header required; this server speaks {PROTOCOL_VERSION}",
                    "data": {"supported": [PROTOCOL_VERSION]},
                }
                await _reply(send, 400, {"jsonrpc": "2.0", "error": error})
                return
            requested = version.decode("latin-1")
            if requested in HANDSHAKE_PROTOCOL_VERSIONS:
                await _reply(send, 400, {"jsonrpc": "2.0", "error": _unsupported(requested)})
                return
        await self._app(scope, receive, send)


async def _reply(send: Send, status: int, body: dict[str, object], *, allow: bool = False) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    if allow:
        headers.append((b"allow", b"POST"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def _unsupported(requested: str) -> dict[str, object]:
    return {
        "code": UNSUPPORTED_PROTOCOL_VERSION,
        "message": (
            f"Unsupported protocol version {requested}: this stateless server speaks {PROTOCOL_VERSION} only "
            "(no initialize, no sessions; questions and load shedding need input_required)"
        ),
        "data": {"supported": [PROTOCOL_VERSION], "requested": requested},
    }
