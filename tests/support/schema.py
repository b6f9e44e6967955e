"""Validate what the worker sends against the official 2026-07-28 JSON Schema.

The schema file is a verbatim copy of `schema/2026-07-28/schema.json` from
modelcontextprotocol/modelcontextprotocol (also in ../shared/spec).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_PATH = Path(__file__).parent.parent / "data" / "mcp-2026-07-28.schema.json"

RESPONSE_DEFINITIONS = {
    "tools/call": "CallToolResultResponse",
    "tools/list": "ListToolsResultResponse",
    "prompts/get": "GetPromptResultResponse",
    "prompts/list": "ListPromptsResultResponse",
    "resources/read": "ReadResourceResultResponse",
    "resources/list": "ListResourcesResultResponse",
    "resources/templates/list": "ListResourceTemplatesResultResponse",
    "server/discover": "DiscoverResultResponse",
    "completion/complete": "CompleteResultResponse",
}


@cache
def _schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    return loaded


@cache
def _validator(definition: str) -> jsonschema.protocols.Validator:
    schema = _schema()
    wrapper = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
    cls = jsonschema.validators.validator_for(wrapper)
    validator: jsonschema.protocols.Validator = cls(wrapper, format_checker=cls.FORMAT_CHECKER)
    return validator


UNIDENTIFIABLE_REQUEST_CODES = frozenset({-32700, -32600})
"""Parse error and invalid request: JSON-RPC 2.0 requires `"id": null` when the id could not be read."""


def check_server_message(method: str, message: dict[str, Any]) -> None:
    """Raise `jsonschema.ValidationError` unless `message` is a valid response to `method`.

    One known gap between the two specs is tolerated and only there: the MCP
    schema makes an error's `id` optional but not nullable, while JSON-RPC 2.0
    (which the SDK follows) answers an unreadable request with `"id": null`.
    Such a message is checked with the null id left out.
    """
    if message.get("id", 0) is None and message.get("error", {}).get("code") in UNIDENTIFIABLE_REQUEST_CODES:
        message = {key: value for key, value in message.items() if key != "id"}
    definition = "JSONRPCErrorResponse" if "error" in message else RESPONSE_DEFINITIONS.get(method)
    if definition is None:
        definition = "JSONRPCResultResponse"
    _validator(definition).validate(message)
