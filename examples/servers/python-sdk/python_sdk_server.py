"""A server on the official MCP Python SDK (2.3.0) as its docs show one: a multi-round tool, nothing else.

    python -m uvicorn --app-dir examples/servers/python-sdk python_sdk_server:app --port 8001

`add_up` asks once, then adds one number a round; the progress travels in `requestState`, which the SDK
seals. Without `REQUEST_STATE_KEYS` the SDK seals with a key each process makes for itself
(`RequestStateSecurity.ephemeral()`, python-sdk#3032): a retry that lands on another instance is refused.
With `REQUEST_STATE_KEYS` (comma-separated secrets of at least 32 bytes, the sealing key first) every
instance shares the ring, and a rolling update may add a key (`old` -> `old,new`) as the SDK's docs say.
"""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult


def _security() -> RequestStateSecurity | None:
    """The shared key ring from the environment; None: the SDK's default, a key per process."""
    keys = [key for key in os.environ.get("REQUEST_STATE_KEYS", "").split(",") if key]
    return RequestStateSecurity(keys=keys) if keys else None


server = MCPServer("python-sdk-example", request_state_security=_security())

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
"""The same server at another path, for the check's `--mcp-path /rpc`."""
