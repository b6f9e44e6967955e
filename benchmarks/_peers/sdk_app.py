"""The MCP SDK's own bare stateless app serving `echo`: the peer the worker's CPU per call is held to.

No host around it, no auth, no metrics, no middleware of ours: `MCPServer`'s
streamable-HTTP app, stateless, with the same tool result as the worker's
`echo` (text content plus structured content). `app` answers JSON (the
SDK's cheapest mode, the target's reference); `sse_app` keeps the SDK's
default of deferring to an event stream, as the worker does so that long
rounds can stream pings and notifications.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse


async def echo(text: str) -> CallToolResult:
    """Return the text it is given."""
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content={"text": text})


async def _ready(_: Request) -> JSONResponse:
    return JSONResponse({"ready": True})


def build(*, json_response: bool) -> Starlette:
    server = MCPServer("sdk-bare", log_level="WARNING")
    server.tool(description="Return the text it is given.")(echo)
    app = server.streamable_http_app(
        stateless_http=True,
        json_response=json_response,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    app.add_route("/readyz", _ready, methods=["GET"])
    return app


app = build(json_response=True)
sse_app = build(json_response=False)
