"""The baseline for the worker-overhead benchmark: FastAPI parsing the same JSON-RPC body, no MCP at all."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)


@app.post("/mcp")
async def echo(request: Request) -> JSONResponse:
    body: dict[str, Any] = await request.json()
    text = body["params"]["arguments"]["text"]
    result = {
        "resultType": "complete",
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"text": text},
    }
    return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": result})


@app.get("/readyz")
async def ready() -> dict[str, bool]:
    return {"ready": True}
