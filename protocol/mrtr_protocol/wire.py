"""How a 2026-07-28 request is framed on Streamable HTTP: the version, the per-request `_meta`, the headers.

The header values use the SDK's own encoding (`encode_header_value`), so a
tool name with edge spaces, non-ASCII or a `=?base64?` look-alike reaches the
server exactly as the SDK's server decodes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp.shared.inbound import encode_header_value
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY

from mrtr_protocol.tasks import TASK_ID_PARAM, TASK_METHODS

PROTOCOL_VERSION = "2026-07-28"
"""The only protocol version the fleet speaks on its modern path."""

PROTOCOL_VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
"""The request's JSON-RPC method, so a proxy or server can route and log it without reading the body."""
NAME_HEADER = "Mcp-Name"
"""The request's target (tool or prompt name, resource URI, task id: `NAMED_METHODS`), in the SDK's encoding."""

NAMED_METHODS: Mapping[str, str] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    **dict.fromkeys(TASK_METHODS, TASK_ID_PARAM),
}
"""Methods whose target travels in the `Mcp-Name` header, and the param that holds it (`taskId` on `tasks/*`)."""

JSON_AND_EVENT_STREAM = "application/json, text/event-stream"


def request_meta(capabilities: Mapping[str, Any], client_info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The `_meta` every 2026-07-28 request carries: the version and the capabilities (never inferred)."""
    meta: dict[str, Any] = {
        PROTOCOL_VERSION_META_KEY: PROTOCOL_VERSION,
        CLIENT_CAPABILITIES_META_KEY: dict(capabilities),
    }
    if client_info is not None:
        meta[CLIENT_INFO_META_KEY] = dict(client_info)
    return meta


def request_headers(
    method: str, params: Mapping[str, Any] | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The HTTP headers of one request: content negotiation, the version, `Mcp-Method` and `Mcp-Name`."""
    headers = {
        "Content-Type": "application/json",
        "Accept": JSON_AND_EVENT_STREAM,
        PROTOCOL_VERSION_HEADER: PROTOCOL_VERSION,
        METHOD_HEADER: method,
    }
    name_param = NAMED_METHODS.get(method)
    if name_param is not None and params is not None:
        headers[NAME_HEADER] = encode_header_value(str(params.get(name_param, "")))
    if extra:
        headers.update(extra)
    return headers


def encode_request(request_id: int | str, method: str, params: Mapping[str, Any]) -> bytes:
    """A JSON-RPC request as bytes on the wire."""
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)}).encode()
