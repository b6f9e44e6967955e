"""Arguments for any tool, prompt or resource template a worker lists: what the pack walks send.

The tests that walk every pack (`test_no_secrets_in_forms.py`, `test_wire_schema.py`) call whatever the
lists name with arguments built from its schema, so a new tool, prompt or resource is walked as soon
as a pack serves it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def argument(schema: Mapping[str, Any]) -> Any:
    """A value for one argument: its first enum value, else a small value of its type."""
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "integer":
        return max(int(schema.get("minimum", 10)), 10)
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return True
    return "rain"


def tool_arguments(input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments for a tool: a value for each required one."""
    properties: Mapping[str, Any] = input_schema.get("properties", {})
    return {name: argument(spec) for name, spec in properties.items() if name in input_schema.get("required", [])}


def prompt_arguments(prompt: Mapping[str, Any]) -> dict[str, str]:
    """Arguments for a prompt: each required one (prompt arguments are strings)."""
    return {a["name"]: "rain" for a in prompt.get("arguments") or [] if a.get("required")}


def template_uri(uri_template: str) -> str:
    """A resource template with each variable filled."""
    return re.sub(r"\{[^}]+\}", "42", uri_template)


def template_variable(uri_template: str) -> str | None:
    """The first variable of a resource template (what a completion request names), if any."""
    found = re.search(r"\{([^}]+)\}", uri_template)
    return found.group(1) if found else None
