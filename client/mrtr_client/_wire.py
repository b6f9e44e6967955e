"""The 2026-07-28 Streamable HTTP wire as this client speaks it: request framing and reply parsing."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from mrtr_client.errors import ProtocolViolation

PROTOCOL_VERSION = "2026-07-28"
NAMED_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""Methods whose target travels in the `Mcp-Name` header, and the param that holds it."""

CLIENT_INFO = {"name": "mrtr-client", "version": "0.1.0"}


def request_meta(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The per-request `_meta` every 2026-07-28 request carries (capabilities are never inferred)."""
    return {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": dict(capabilities),
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    }


def _header_value(value: str) -> str:
    if value.isascii() and value.isprintable():
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def request_headers(method: str, params: Mapping[str, Any], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": method,
    }
    name_param = NAMED_METHODS.get(method)
    if name_param is not None:
        headers["Mcp-Name"] = _header_value(str(params.get(name_param, "")))
    if extra:
        headers.update(extra)
    return headers


def encode_request(request_id: int, method: str, params: Mapping[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)}).encode()


def parse_reply(content_type: str, body: bytes, request_id: int) -> dict[str, Any]:
    """The JSON-RPC response to `request_id` from a JSON or server-sent-events body."""
    if "text/event-stream" in content_type:
        for message in _sse_messages(body):
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return message
        raise ProtocolViolation(f"event stream ended without a response to request {request_id}")
    try:
        message = json.loads(body)
    except ValueError:
        raise ProtocolViolation(f"response is not JSON: {body[:80]!r}") from None
    if not isinstance(message, dict):
        raise ProtocolViolation("response is not a JSON-RPC object")
    return message


def _sse_messages(body: bytes) -> list[dict[str, Any]]:
    messages = []
    for event in body.decode("utf-8", "replace").replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in event.split("\n") if line.startswith("data:"))
        if not data:
            continue
        try:
            parsed = json.loads(data)
        except ValueError:
            continue
        if isinstance(parsed, dict):
            messages.append(parsed)
    return messages
