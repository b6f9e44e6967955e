"""What every answer of the worker must satisfy, whatever was sent: the fuzz suite's oracle.

* never a 5xx, never a stack trace in the body;
* a JSON-RPC answer is valid per the official schema (`tests.support.schema`),
  echoes the request id (or is null/absent only where JSON-RPC allows it), and
  its HTTP status fits its error code (400 for -32700/-32600/-32602/-3202x,
  404 for -32601, 200 for a result);
* never -32603 (internal error) and never a tool result that only says the
  tool raised: both mean the worker let an exception through;
* an answer that is not JSON-RPC is one of the transport rejections (bad
  Content-Type or Accept, Host, Origin, verb, body size), the 202 of a
  notification, or a 401 in the RFC 6750 shape; the fuzzed worker allows
  anonymous calls, so a 401 only ever answers a request that carried
  credentials (a bad token never becomes an anonymous call, nor a 5xx).

A request that names a 2025-era protocol version in its header is refused at
the edge, whatever its body: HTTP 400 with -32022 and `data: {supported,
requested}` (the README's policy for 2025-era clients).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import httpx
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mrtr_protocol.wire import PROTOCOL_VERSION
from tests.support.schema import check_server_message
from tests.support.wire import parse_body

STATUS_FOR_CODE = {
    -32700: 400,  # parse error
    -32600: 400,  # invalid request
    -32601: 404,  # method not found
    -32602: 400,  # invalid params
    -32020: 400,  # header mismatch
    -32021: 400,  # missing required client capability
    -32022: 400,  # unsupported protocol version
}
UNIDENTIFIABLE = frozenset({-32700, -32600})
"""JSON-RPC answers these with a null id when the request's id could not be read."""

TRANSPORT_REJECTIONS = frozenset({400, 403, 405, 406, 413, 421})
"""Plain HTTP refusals before any JSON-RPC: Content-Type, Origin, verb, Accept, body size, Host."""

LIMIT_REFUSALS = {413: "request body too large", 431: "request head larger than"}
"""The worker's refusals by size, before any JSON-RPC is read: a JSON-RPC error with a null id naming the limit."""

INTERNAL_ERROR = -32603
_TOOL_RAISED = re.compile(r"Error executing tool \S*")
_STACK_TRACE = ("Traceback (most recent call last)", 'File "/')
_NOT_JSON = object()


@dataclass(frozen=True)
class Sent:
    """One HTTP request as it went on the wire."""

    body: bytes
    headers: list[tuple[str, bytes]]

    @cached_property
    def message(self) -> Any:
        """The body as the worker's JSON parser reads it (later duplicate keys win), or `_NOT_JSON`."""
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError):
            return _NOT_JSON

    def header(self, name: str) -> str | None:
        """The first value of a header, as the SDK reads it (latin-1)."""
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value.decode("latin-1")
        return None

    @property
    def method(self) -> str:
        message = self.message
        method = message.get("method") if isinstance(message, dict) else None
        return method if isinstance(method, str) else ""

    @property
    def legacy(self) -> bool:
        """A 2025-era version header: the worker refuses it with -32022 before reading the body."""
        return self.header("mcp-protocol-version") in HANDSHAKE_PROTOCOL_VERSIONS


@dataclass(frozen=True)
class Verdict:
    """How the worker answered, once the oracle has accepted the answer."""

    status: int
    kind: str
    """`result`, `error`, `accepted` (202 to a notification), `unauthorized` (401) or `transport` (an HTTP refusal)."""
    message: dict[str, Any]

    @property
    def code(self) -> int | None:
        error = self.message.get("error")
        return error.get("code") if isinstance(error, dict) else None

    @property
    def outcome(self) -> str:
        """A short label for the case tally."""
        if self.kind == "error":
            return f"error {self.code}"
        if self.kind in ("transport", "unauthorized"):
            return f"http {self.status}"
        return self.kind


def judge(sent: Sent, response: httpx.Response) -> Verdict:
    """Assert every property of an answer to `sent`; return what kind of answer it was."""
    text = response.text
    assert response.status_code < 500, f"{response.status_code} for {_show(sent)}: {text[:300]}"
    for marker in _STACK_TRACE:
        assert marker not in text, f"stack trace in the body for {_show(sent)}: {text[:500]}"
    content_type = response.headers.get("content-type", "")
    if response.status_code == 401:
        assert sent.header("authorization") is not None, f"401 to a request without credentials: {_show(sent)}"
        assert response.headers.get("www-authenticate", "").startswith("Bearer"), response.headers
        assert response.json()["error"] == "invalid_token", text[:200]
        return Verdict(401, "unauthorized", {})
    if response.status_code == 202:
        assert not response.content, text[:200]
        assert isinstance(sent.message, dict), f"202 to a body that is not a JSON object: {_show(sent)}"
        assert "id" not in sent.message, f"202 to a request that has an id: {_show(sent)}"
        return Verdict(202, "accepted", {})
    if response.status_code in LIMIT_REFUSALS:
        return _limit_refusal(sent, response)
    if not content_type.startswith(("application/json", "text/event-stream")):
        assert response.status_code in TRANSPORT_REJECTIONS, f"{response.status_code} {text[:200]!r}"
        return Verdict(response.status_code, "transport", {})
    message = parse_body(response)
    if sent.legacy:
        _check_legacy_refusal(sent, response.status_code, message)
    else:
        check_server_message(sent.method, message)
        _check_status(response.status_code, message)
        _check_id(sent, message)
    _check_no_internal_failure(sent, message)
    return Verdict(response.status_code, "error" if "error" in message else "result", message)


def _limit_refusal(sent: Sent, response: httpx.Response) -> Verdict:
    status = response.status_code
    assert response.headers.get("content-type") == "application/json", response.headers
    message = response.json()
    _check_envelope(message)
    assert message["id"] is None, message
    assert message["error"]["code"] == -32600, message
    assert LIMIT_REFUSALS[status] in message["error"]["message"], message
    if status == 413:
        assert message["error"]["data"]["limit"] == "bodyBytes", message
        assert len(sent.body) > message["error"]["data"]["max"], message
    return Verdict(status, "transport", message)


def _check_legacy_refusal(sent: Sent, status: int, message: dict[str, Any]) -> None:
    _check_envelope(message)
    assert status == 400, f"{status} to a 2025-era request: {_show(sent)}"
    error = message.get("error") or {}
    assert error.get("code") == -32022, f"2025-era request not refused with -32022: {message}"
    requested = sent.header("mcp-protocol-version")
    assert error.get("data") == {"supported": [PROTOCOL_VERSION], "requested": requested}, error


def _check_envelope(message: dict[str, Any]) -> None:
    assert message.get("jsonrpc") == "2.0", message
    assert ("result" in message) != ("error" in message), message
    if "error" in message:
        assert isinstance(message["error"].get("code"), int), message
        assert isinstance(message["error"].get("message"), str), message


def _check_status(status: int, message: dict[str, Any]) -> None:
    if "result" in message:
        assert status == 200, (status, message)
        return
    code = message["error"]["code"]
    assert code in STATUS_FOR_CODE, f"unexpected error code {code}: {message}"
    assert status == STATUS_FOR_CODE[code], f"HTTP {status} for error {code}: {message}"


def _check_id(sent: Sent, message: dict[str, Any]) -> None:
    request = sent.message if isinstance(sent.message, dict) else {}
    sent_id = request.get("id", _NOT_JSON)
    readable = isinstance(sent_id, str | int) and not isinstance(sent_id, bool)
    if "id" not in message:
        # Only the edge's own rejection (no protocol header) answers before reading the body.
        assert message.get("error", {}).get("code") == -32020, message
        return
    answered = message["id"]
    if answered is None:
        assert message.get("error", {}).get("code") in UNIDENTIFIABLE, f"null id on {message}"
        return
    assert readable, f"answered id {answered!r} to a request whose id is {sent_id!r}"
    assert type(answered) is type(sent_id), (sent_id, answered)
    assert answered == sent_id, (sent_id, answered)


def _check_no_internal_failure(sent: Sent, message: dict[str, Any]) -> None:
    error = message.get("error")
    if isinstance(error, dict):
        assert error.get("code") != INTERNAL_ERROR, f"internal error for {_show(sent)}: {error}"
        return
    result = message.get("result")
    content = result.get("content") if isinstance(result, dict) else None
    if result and result.get("isError") and isinstance(content, list) and content:
        text = content[0].get("text", "") if isinstance(content[0], dict) else ""
        assert not _TOOL_RAISED.fullmatch(text), f"the tool raised on {_show(sent)}: {text}"


def _show(sent: Sent) -> str:
    body = sent.body if len(sent.body) <= 400 else sent.body[:400] + b"...(%d bytes)" % len(sent.body)
    return f"body={body!r} headers={sent.headers!r}"
