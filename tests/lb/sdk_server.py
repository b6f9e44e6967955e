"""An MCP server on the official SDK as a new user writes one: one tool, stateless, no `/readyz`.

`python -m uvicorn tests.lb.sdk_server:app --port N`; what the proxy must be able to front (issue #38).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-plain")


@server.tool(description="Return the text it is given.")
async def echo(text: str) -> str:
    return text


app = server.streamable_http_app(stateless_http=True)
