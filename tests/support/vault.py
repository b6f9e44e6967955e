"""Driving `connect_vault` in tests: MCP calls under a user's token, and the vault page over plain HTTP.

Shared by the route tests (httpx) and the browser test (Chromium), so both
start and finish flows exactly the same way, on the wire. The page visitor is
`mrtr_ops.vault_page`'s, which `scripts/interop` uses too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from mrtr_ops.vault_page import PageVisitor, csrf_in, flow_of
from mrtr_protocol.wire import encode_request, request_headers, request_meta

__all__ = ["URL_MODE", "PageVisitor", "VaultCall", "asked_url", "csrf_in", "flow_of"]

URL_MODE: dict[str, Any] = {"elicitation": {"url": {}}}


@dataclass
class VaultCall:
    """One `connect_vault` call by one user, round by round (the state and answers are the test's to choose)."""

    mcp_url: str
    token: str | None
    http: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=30.0))
    state: str | None = None
    _ids: int = 0

    def round(self, action: str | None = None, *, state: str | None = None) -> dict[str, Any]:
        """Send one round (the first, or a retry with `action` as the URL-mode answer); returns the result."""
        message = self.message(action, state=state)
        assert "result" in message, message
        result: dict[str, Any] = message["result"]
        if result.get("resultType") == "input_required":
            self.state = result["requestState"]
        return result

    def message(
        self, action: str | None = None, *, state: str | None = None, capabilities: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Send one round and return the JSON-RPC reply as it came (a result or an error)."""
        meta = request_meta(URL_MODE if capabilities is None else capabilities)
        params: dict[str, Any] = {"_meta": meta, "name": "connect_vault", "arguments": {}}
        state = state or self.state
        if state is not None:
            params["requestState"] = state
        if action is not None:
            params["inputResponses"] = {"vault": {"action": action}}
        headers = request_headers("tools/call", params)
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        self._ids += 1
        reply = self.http.post(self.mcp_url, headers=headers, content=encode_request(self._ids, "tools/call", params))
        message: dict[str, Any] = reply.json()
        return message

    def close(self) -> None:
        self.http.close()


def asked_url(result: dict[str, Any]) -> str:
    """The URL a URL-mode input_required sends the user to."""
    assert result.get("resultType") == "input_required", result
    params = result["inputRequests"]["vault"]["params"]
    assert params["mode"] == "url", params
    url: str = params["url"]
    return url
