"""The worker's outermost ASGI app: `/mcp` goes straight to the MCP stack, everything else to FastAPI.

Crossing FastAPI's whole stack (its error and exception middleware,
telemetry, body limit, an exit stack, and a match against every host route
before the catch-all mount), then the SDK's own Starlette wrapper, costs a
third of the worker's CPU on a trivial call, and the MCP path needs none of
it: it has its own body limit (the SDK's), its own errors (JSON-RPC) and one
route. Host routes (`/healthz`, `/readyz`, `/metrics`, `/admin/*`, the vault
pages) and any other path go through FastAPI.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

MCP_PATH = "/mcp"


class FrontDoor:
    """Dispatch on the path alone; `state` is the host's, so `app.state.worker` reads as on the FastAPI app."""

    def __init__(self, *, mcp: ASGIApp, host: Any) -> None:
        self._mcp = mcp
        self._host = host
        self.state = host.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == MCP_PATH:
            await self._mcp(scope, receive, send)
        else:
            await self._host(scope, receive, send)  # lifespan too: the host runs the worker's start and stop
