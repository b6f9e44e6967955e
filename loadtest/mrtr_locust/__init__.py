"""The MRTR Locust suite's library: expected answers, checks, custom statistics, users and the Locust hooks.

Imports only the MRTR client (`mrtr_client`) and the Locust stack, so the
`loadtest` image (which holds `client/mrtr_client` and `loadtest/` only) runs it.

Public: `McpUser` (a Locust user for any MCP server, `mcp_user`) and its call descriptions
(`McpCall`, `McpCallRecord`, `structured_is`, `text_is`, `mcp_calls`). `McpUser` is loaded on first
use, so importing another module of this package does not import Locust (and gevent's patching).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mrtr_locust.mcp_calls import CallSpecError, McpCall, McpCallRecord, structured_is, text_is

if TYPE_CHECKING:
    from mrtr_locust.mcp_user import McpUser

__all__ = ["CallSpecError", "McpCall", "McpCallRecord", "McpUser", "structured_is", "text_is"]


def __getattr__(name: str) -> Any:
    if name == "McpUser":
        from mrtr_locust.mcp_user import McpUser

        return McpUser
    raise AttributeError(f"module 'mrtr_locust' has no attribute {name!r}")
