"""The Mcp-Param header check is skipped only for a tool whose schema declares no header: the SDK's verdict, once."""

from __future__ import annotations

from typing import Any

from mcp.shared.inbound import validate_mcp_param_headers

from mrtr_worker.server import headerless_schemas_skipped

PLAIN: dict[str, Any] = {"type": "object", "properties": {"limit": {"type": "integer"}}}
DECLARING: dict[str, Any] = {
    "type": "object",
    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
}


def test_a_schema_without_headers_is_not_walked_and_one_with_headers_still_is() -> None:
    asked: list[str] = []

    def lookup(name: str) -> dict[str, Any] | None:
        asked.append(name)
        return {"plain": PLAIN, "declaring": DECLARING}.get(name)

    skipping = headerless_schemas_skipped(lookup)
    assert skipping("plain") is None
    assert skipping("plain") is None
    assert skipping("declaring") is DECLARING
    assert skipping("missing") is None
    assert asked == ["plain", "plain", "declaring", "missing"]  # every call asks: a tool may come or go


def test_skipping_gives_the_sdks_own_verdict_on_a_headerless_schema() -> None:
    # What the SDK would have decided: nothing to compare, whatever the headers say.
    assert validate_mcp_param_headers(PLAIN, {"limit": 5}, {"mcp-param-limit": "6"}) is None
    assert validate_mcp_param_headers(DECLARING, {"region": "eu"}, {}) is not None  # a declared header is checked
