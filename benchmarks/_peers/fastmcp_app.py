"""FastMCP 4 serving `echo` statelessly on the 2026-07-28 wire: a popular framework as a second peer.

Imported only when `fastmcp` is installed (the `bench` dependency group);
the benchmark leaves its row out otherwise.
"""

from __future__ import annotations

from fastmcp import FastMCP
from starlette.requests import Request
from starlette.responses import JSONResponse

server = FastMCP("fastmcp-bare")


@server.tool(description="Return the text it is given.")
async def echo(text: str) -> dict[str, str]:
    return {"text": text}


@server.custom_route("/readyz", methods=["GET"])
async def _ready(_: Request) -> JSONResponse:
    return JSONResponse({"ready": True})


app = server.http_app(path="/mcp", stateless_http=True, json_response=True)
