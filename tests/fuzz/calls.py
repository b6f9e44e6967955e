"""Valid 2026-07-28 requests for every method and tool the worker serves, and their correct headers.

The wire fuzz starts from these and breaks them; the control test checks that
each one, unbroken, gets a result.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from mcp.shared.inbound import encode_header_value

from mrtr_protocol.wire import JSON_AND_EVENT_STREAM, NAMED_METHODS, PROTOCOL_VERSION, request_meta

ELICIT: dict[str, Any] = {"elicitation": {}}
FORM_AND_URL: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
SAMPLING: dict[str, Any] = {"sampling": {}}
ROOTS: dict[str, Any] = {"roots": {}}

LOGIN_ANSWER = {"action": "accept", "content": {"name": "octocat"}}
HAIKU_ANSWER = {"role": "assistant", "content": {"type": "text", "text": "rain on the roof"}, "model": "m"}


@dataclass(frozen=True)
class Call:
    """One valid request: method, params (without `_meta`) and the capabilities it declares."""

    label: str
    method: str
    params: dict[str, Any]
    capabilities: dict[str, Any]

    def document(self, request_id: int | str = 1) -> dict[str, Any]:
        params = {**self.params, "_meta": envelope(self.capabilities)}
        return {"jsonrpc": "2.0", "id": request_id, "method": self.method, "params": params}


def envelope(capabilities: dict[str, Any]) -> dict[str, Any]:
    return request_meta(capabilities)


def _tool(label: str, name: str, arguments: dict[str, Any], caps: dict[str, Any], **more: Any) -> Call:
    return Call(label, "tools/call", {"name": name, "arguments": arguments, **more}, caps)


VALID_CALLS: tuple[Call, ...] = (
    Call("discover", "server/discover", {}, {}),
    Call("tools/list", "tools/list", {}, {}),
    Call("prompts/list", "prompts/list", {}, {}),
    Call("resources/list", "resources/list", {}, {}),
    Call("templates/list", "resources/templates/list", {}, {}),
    _tool("echo", "echo", {"text": "hi"}, {}),
    _tool("link", "link_accounts", {}, ELICIT),
    _tool("link+answer", "link_accounts", {}, ELICIT, inputResponses={"github_login": LOGIN_ANSWER}),
    _tool("haiku", "write_haiku", {"topic": "rain"}, SAMPLING),
    _tool("haiku+answer", "write_haiku", {"topic": "rain"}, SAMPLING, inputResponses={"haiku": HAIKU_ANSWER}),
    _tool("roots", "scan_roots", {}, ROOTS),
    _tool("roots+answer", "scan_roots", {}, ROOTS, inputResponses={"roots": {"roots": [{"uri": "file:///w"}]}}),
    _tool("vault", "connect_vault", {}, FORM_AND_URL),
    _tool("primes", "count_primes", {"limit": 10_000, "segment": 1_000}, {}),
    _tool("hash", "hash_chain", {"seed": "s", "iterations": 100}, {}),
    _tool("pi", "estimate_pi", {"samples": 1_000, "seed": 3, "ask_to_refine": True}, ELICIT),
    Call("prompt", "prompts/get", {"name": "onboarding"}, ELICIT),
    Call(
        "prompt+answer",
        "prompts/get",
        {"name": "onboarding", "inputResponses": {"preferred_name": LOGIN_ANSWER}},
        ELICIT,
    ),
    Call("resource", "resources/read", {"uri": "mrtr://reports/42"}, ELICIT),
    Call(
        "resource+answer",
        "resources/read",
        {"uri": "mrtr://reports/42", "inputResponses": {"detail": {"action": "accept", "content": {"detail": "full"}}}},
        ELICIT,
    ),
)


def headers_for(message: Any) -> list[tuple[str, bytes]]:
    """The headers a correct client sends with `message` (as far as it is a request at all)."""
    headers = [
        ("Content-Type", b"application/json"),
        ("Accept", JSON_AND_EVENT_STREAM.encode()),
        ("MCP-Protocol-Version", PROTOCOL_VERSION.encode()),
    ]
    if not isinstance(message, dict):
        return headers
    method = message.get("method")
    if isinstance(method, str):
        headers.append(("Mcp-Method", header_text(method)))
    params = message.get("params")
    if isinstance(method, str) and method in NAMED_METHODS and isinstance(params, dict):
        name = params.get(NAMED_METHODS[method], "")
        headers.append(("Mcp-Name", header_text(name if isinstance(name, str) else str(name))))
    return headers


def header_text(value: str) -> bytes:
    """A header value as the SDK's client encodes it (`=?base64?...?=` for anything not plain ASCII)."""
    try:
        return encode_header_value(value).encode("ascii")
    except UnicodeEncodeError:  # a lone surrogate: no client could encode it; send its bytes anyway
        return b"=?base64?" + base64.b64encode(value.encode("utf-8", "surrogatepass")) + b"?="
