"""Raw 2026-07-28 HTTP exchanges for tests that need to send exactly what they mean, bad input included.

Every JSON-RPC message that comes back is checked against the official schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from mrtr_protocol import events
from mrtr_protocol.wire import encode_request, request_headers, request_meta
from tests.support.schema import check_server_message


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
            body_params.setdefault("_meta", request_meta(capabilities or {}))
        body = encode_request(self._next_id, method, body_params)
        return self.send(method, body, request_headers(method, body_params, headers))

    def send(self, method: str, body: bytes, headers: dict[str, str]) -> Exchange:
        response = self.http.post(self.url, content=body, headers=headers)
        message = parse_body(response)
        if message:
            check_server_message(method, message)
        return Exchange(response.status_code, response.headers, message)


def parse_body(response: httpx.Response) -> dict[str, Any]:
    """The message a reply carries: a JSON body's object, or the last response on an event stream ({} if empty)."""
    if not response.content:
        return {}
    content_type = response.headers.get("content-type", "")
    if events.EVENT_STREAM in content_type:
        final = events.response(content_type, response.content)
        assert final is not None, f"no response on the event stream: {response.text[:200]}"
        return final
    found = events.messages(content_type, response.content)
    assert found, f"the body is not a JSON object: {response.text[:200]}"
    return found[0]
