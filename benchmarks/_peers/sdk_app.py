"""The MCP SDK's own bare stateless app serving `echo`: the peer the worker's CPU per call is held to.

No host around it, no auth, no metrics, no middleware of ours: `MCPServer`'s
streamable-HTTP app, stateless, answering JSON, with the same tool result as
the worker's `echo` (text content plus structured content).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse

server = MCPServer("sdk-bare", log_level="WARNING")


@server.tool(description="Return the text it is given.")
async def echo(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content={"text": text})


async def _ready(_: Request) -> JSONResponse:
    return JSONResponse({"ready": True})


_mcp = server.streamable_http_app(
    stateless_http=True,
    json_response=True,
    transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
)
_mcp.add_route("/readyz", _ready, methods=["GET"])
app: Starlette = _mcp
