"""A server on the official Python SDK as its docs show one: a multi-round tool, the SDK's default key.

`python -m uvicorn tests.fleetcheck.sdk_default_key_server:app --port N`. No `RequestStateSecurity`
is given, so each process seals `requestState` with a key it made itself (python-sdk#3032): the
fleet check must name `refused_across_instances`.
"""

from __future__ import annotations

import json

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

server = MCPServer("sdk-default-key")

CONFIRM = ElicitRequest(
    params=ElicitRequestFormParams(
        message="Add these numbers up?",
        requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    )
)


@server.tool(description="Add the numbers up, one a round, after asking once; the progress travels in requestState.")
async def add_up(numbers: list[int], ctx: Context) -> dict[str, int] | InputRequiredResult:
    if ctx.request_state is None:
        return InputRequiredResult(
            input_requests={"confirm": CONFIRM}, request_state=json.dumps({"next": 0, "total": 0})
        )
    progress = json.loads(ctx.request_state)
    if progress["next"] == len(numbers):
        return {"total": progress["total"]}
    done = {"next": progress["next"] + 1, "total": progress["total"] + numbers[progress["next"]]}
    return InputRequiredResult(request_state=json.dumps(done))


app = server.streamable_http_app(stateless_http=True)
rpc_app = server.streamable_http_app(stateless_http=True, streamable_http_path="/rpc")
"""The same server at another path, for `--mcp-path /rpc`."""
