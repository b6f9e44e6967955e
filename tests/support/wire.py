"""Raw 2026-07-28 HTTP exchanges for tests that need to send exactly what they mean, bad input included.

Every JSON-RPC message that comes back is checked against the official schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from tests.support.schema import check_server_message

PROTOCOL_VERSION = "2026-07-28"
NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def meta(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities if capabilities is not None else {},
    }


def headers_for(method: str, params: dict[str, Any] | None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": method,
    }
    if method in NAME_PARAM and params is not None:
        headers["Mcp-Name"] = str(params.get(NAME_PARAM[method], ""))
    return headers


@dataclass
class Exchange:
    status: int
    headers: httpx.Headers
    message: dict[str, Any]

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.message, self.message
        result: dict[str, Any] = self.message["result"]
        return result

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.message, self.message
        error: dict[str, Any] = self.message["error"]
        return error


class McpHttp:
    """Posts one JSON-RPC message per request to `url` and validates every answer."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=30.0)
        self._next_id = 0
        self.sent_ids: list[int] = []

    def close(self) -> None:
        self.http.close()

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        capabilities: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        with_meta: bool = True,
    ) -> Exchange:
        self._next_id += 1
        self.sent_ids.append(self._next_id)
        body_params = dict(params or {})
        if with_meta:
            body_params.setdefault("_meta", meta(capabilities))
        body = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": body_params}
        return self.send(method, json.dumps(body).encode(), {**headers_for(method, body_params), **(headers or {})})

    def send(self, method: str, body: bytes, headers: dict[str, str]) -> Exchange:
        response = self.http.post(self.url, content=body, headers=headers)
        message = parse_body(response)
        if message:
            check_server_message(method, message)
        return Exchange(response.status_code, response.headers, message)


def parse_body(response: httpx.Response) -> dict[str, Any]:
    if not response.content:
        return {}
    if "text/event-stream" in response.headers.get("content-type", ""):
        events = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        messages = [json.loads(e) for e in events if e]
        finals = [m for m in messages if "result" in m or "error" in m]
        assert finals, f"no response on the event stream: {response.text[:200]}"
        last: dict[str, Any] = finals[-1]
        return last
    parsed: dict[str, Any] = response.json()
    return parsed
