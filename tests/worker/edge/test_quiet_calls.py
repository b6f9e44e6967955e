"""Quiet tools (`echo`) take the SDK's JSON path, chosen by the `Mcp-Name` header: the header cannot lie.

Routing reads the header only; the SDK's handler on that path still checks
it against the body, so a call that names a quiet tool in the header and
another tool in the body is refused, never run without its event stream.
"""

from __future__ import annotations

from mrtr_ops.local.process import WorkerSpec
from mrtr_protocol.wire import encode_request, request_headers, request_meta
from tests.support.wire import McpHttp

HEADER_MISMATCH = -32020


def test_a_quiet_tool_answers_json(worker: WorkerSpec) -> None:
    client = McpHttp(f"{worker.url}/mcp")
    try:
        exchange = client.call("tools/call", {"name": "echo", "arguments": {"text": "quiet"}})
    finally:
        client.close()
    assert exchange.status == 200
    assert exchange.headers["content-type"].startswith("application/json")
    assert exchange.result["structuredContent"] == {"text": "quiet"}


def test_a_header_naming_a_quiet_tool_for_another_tools_body_is_refused(worker: WorkerSpec) -> None:
    params = {"_meta": request_meta({}), "name": "link_accounts", "arguments": {}}
    headers = request_headers("tools/call", {"name": "echo"})  # the quiet tool's header, another tool's body
    client = McpHttp(f"{worker.url}/mcp")
    try:
        exchange = client.send("tools/call", encode_request(1, "tools/call", params), headers)
    finally:
        client.close()
    assert exchange.message["error"]["code"] == HEADER_MISMATCH, exchange.message
    assert "result" not in exchange.message
