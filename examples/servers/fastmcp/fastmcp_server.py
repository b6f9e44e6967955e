"""A FastMCP 4.1.6 server with a multi-round tool, written with FastMCP's documented guard pattern only.

    python -m uvicorn --app-dir examples/servers/fastmcp fastmcp_server:app --port 8002

`greet` asks two questions over two rounds (a name, then a greeting style) by returning an
`InputRequiredResult`, and reads the answers from `ctx.input_responses`; the name travels to the second
round in `ctx.request_state`, which FastMCP seals through the SDK. Without `REQUEST_STATE_KEYS` no
`request_state_security` is given, as in FastMCP's examples, so each process seals with a key of its own;
with it (comma-separated secrets of at least 32 bytes, the sealing key first) every instance shares them.
"""

from __future__ import annotations

import os

from fastmcp import Context, FastMCP
from mcp.server.request_state import RequestStateSecurity
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

_keys = [key for key in os.environ.get("REQUEST_STATE_KEYS", "").split(",") if key]
server = FastMCP("fastmcp-example", request_state_security=RequestStateSecurity(keys=_keys) if _keys else None)


def _ask(message: str, field: str) -> ElicitRequest:
    schema = {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _answer(ctx: Context, key: str, field: str) -> str | None:
    answer = (ctx.input_responses or {}).get(key)
    if isinstance(answer, ElicitResult) and answer.action == "accept" and answer.content:
        return str(answer.content.get(field, ""))
    return None


@server.tool(description="Greet someone: asks for a name, then for a style, in two rounds.")
async def greet(ctx: Context) -> str | InputRequiredResult:
    name = ctx.request_state or _answer(ctx, "name", "name")
    if name is None:
        return InputRequiredResult(input_requests={"name": _ask("Whom shall I greet?", "name")})
    style = _answer(ctx, "style", "style")
    if style is None:
        return InputRequiredResult(input_requests={"style": _ask("Which style?", "style")}, request_state=name)
    return f"{'Hello' if style == 'plain' else 'Ahoy'}, {name}!"


app = server.http_app(path="/mcp", stateless_http=True)
