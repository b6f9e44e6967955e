"""Who owns a task: the caller's authenticated principal, exactly as sealed `requestState` binds it.

The SDK's `authenticated_principal` gives (client, issuer, subject) for a
verified bearer token and None for an anonymous call, so an anonymous task is
readable only anonymously, and a token's task only by that principal. Any
mismatch is answered like an unknown task id: nobody learns that a task exists.
"""

from __future__ import annotations

import hashlib
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.request_state import authenticated_principal


def principal_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    return authenticated_principal(ctx)


def principal_digest(principal: str | None) -> str:
    """A fixed-length, non-revealing name for a principal's key in Redis (the per-principal cap)."""
    label = "anonymous" if principal is None else f"p:{principal}"
    return hashlib.sha256(label.encode("utf-8", "surrogatepass")).hexdigest()[:32]
