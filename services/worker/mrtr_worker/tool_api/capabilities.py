"""Per-request client capability checks (MCP 2026-07-28).

Capabilities arrive with every request and must never be inferred from an
earlier one. A tool that cannot proceed without one raises `-32021` with the
capability it needs; a tool that can proceed without it asks for less.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY, ClientCapabilities


class Need(StrEnum):
    """A kind of input request a tool may send."""

    FORM = "form"
    URL = "url"
    SAMPLING = "sampling"
    ROOTS = "roots"


_REQUIRED_CAPABILITIES: dict[Need, dict[str, Any]] = {
    Need.FORM: {"elicitation": {"form": {}}},
    Need.URL: {"elicitation": {"url": {}}},
    Need.SAMPLING: {"sampling": {}},
    Need.ROOTS: {"roots": {}},
}
"""The `requiredCapabilities` document of a -32021 error for each kind."""


def allows(capabilities: ClientCapabilities | None, need: Need) -> bool:
    """Whether this request's declared capabilities permit an input request of `need`'s kind."""
    if capabilities is None:
        return False
    if need is Need.SAMPLING:
        return capabilities.sampling is not None
    if need is Need.ROOTS:
        return capabilities.roots is not None
    elicitation = capabilities.elicitation
    if elicitation is None:
        return False
    form_declared = elicitation.form is not None
    url_declared = elicitation.url is not None
    if need is Need.URL:
        return url_declared
    # An empty `elicitation: {}` means form mode only.
    return form_declared or not url_declared


def require(capabilities: ClientCapabilities | None, need: Need, *, why: str) -> None:
    """Raise `-32021` (HTTP 400) unless the request declared what `need` requires."""
    if allows(capabilities, need):
        return
    raise MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=f"Missing required client capability: {why}",
        data={"requiredCapabilities": _REQUIRED_CAPABILITIES[need]},
    )


_NEED_OF_METHOD = {"sampling/createMessage": Need.SAMPLING, "roots/list": Need.ROOTS}


def need_of(request: Mapping[str, Any]) -> Need:
    """The capability an input request (wire shape) needs: its method, and for elicitation its mode."""
    method = request.get("method")
    if method == "elicitation/create":
        params = request.get("params")
        mode = params.get("mode", "form") if isinstance(params, Mapping) else "form"
        return Need.URL if mode == "url" else Need.FORM
    need = _NEED_OF_METHOD.get(str(method))
    if need is None:
        raise ValueError(f"not an input request method: {method!r}")
    return need
