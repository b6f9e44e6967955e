"""Validate what the fleet sends against the official JSON Schemas: the 2026-07-28 wire and the tasks extension.

Both files are verbatim copies (also in ../shared/spec): `schema/2026-07-28/schema.json` from
modelcontextprotocol/modelcontextprotocol, and `schema/draft/schema.json` from
modelcontextprotocol/ext-tasks. A task answer is checked against the extension's own definition
(`CreateTaskResult`, `GetTaskResult`, `UpdateTaskResult`, `CancelTaskResult`, `TaskStatusNotification`),
inside the wire's JSON-RPC envelope. The extension types a completed task's inlined `result` as any
object, but says it has the shape of the tool's own result: it is also checked against the wire's
`CallToolResult` (that check is what catches an inlined result without `resultType`).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

DATA = Path(__file__).parent.parent / "data"
SCHEMA_PATH = DATA / "mcp-2026-07-28.schema.json"
TASKS_SCHEMA_PATH = DATA / "mcp-ext-tasks-draft.schema.json"
WIRE, TASKS = "wire", "tasks"
_PATHS = {WIRE: SCHEMA_PATH, TASKS: TASKS_SCHEMA_PATH}

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
    "subscriptions/listen": "SubscriptionsListenResultResponse",
}
"""The wire's definition of a complete answer to each core method."""

TASK_RESULT_DEFINITIONS = {
    "tasks/get": "GetTaskResult",
    "tasks/update": "UpdateTaskResult",
    "tasks/cancel": "CancelTaskResult",
}
"""The extension's definition of the result of each of its methods."""

CREATE_TASK_RESULT = "CreateTaskResult"
TASK_NOTIFICATION = "notifications/tasks"
TASK_NOTIFICATION_DEFINITION = "TaskStatusNotification"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
ACKNOWLEDGED_TASKS_DEFINITION = "TaskSubscriptionAcknowledgedNotifications"
"""What the extension adds to a listen's acknowledgement: the `taskIds` honoured."""


@cache
def _schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(_PATHS[name].read_text())
    return loaded


@cache
def _validator(definition: str, schema_name: str = WIRE) -> jsonschema.protocols.Validator:
    schema = _schema(schema_name)
    if definition not in schema["$defs"]:
        raise KeyError(f"{definition} is not defined in the {schema_name} schema")
    wrapper = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
    cls = jsonschema.validators.validator_for(wrapper)
    validator: jsonschema.protocols.Validator = cls(wrapper, format_checker=cls.FORMAT_CHECKER)
    return validator


def validate(definition: str, value: Any, schema_name: str = WIRE) -> None:
    """Raise `jsonschema.ValidationError` unless `value` is a valid `definition` of the named schema."""
    _validator(definition, schema_name).validate(value)


@cache
def _notification_definitions() -> dict[str, str]:
    """Each server notification's method -> its wire definition (from `ServerNotification`)."""
    defs = _schema(WIRE)["$defs"]
    found = {}
    for ref in defs["ServerNotification"]["anyOf"]:
        name = ref["$ref"].rsplit("/", 1)[-1]
        found[defs[name]["properties"]["method"]["const"]] = name
    return found


UNIDENTIFIABLE_REQUEST_CODES = frozenset({-32700, -32600})
"""Parse error and invalid request: JSON-RPC 2.0 requires `"id": null` when the id could not be read."""


def check_server_message(method: str, message: dict[str, Any]) -> None:
    """Raise `jsonschema.ValidationError` unless `message` is a valid message of the answer to `method`.

    A notification (on a reply's event stream or a listen's) is checked as a notification; a response
    by the definition of `method`'s result (a task's by the extension's). One known gap between the two
    specs is tolerated and only there: the MCP schema makes an error's `id` optional but not nullable,
    while JSON-RPC 2.0 (which the SDK follows) answers an unreadable request with `"id": null`. Such a
    message is checked with the null id left out.
    """
    if "method" in message and "id" not in message:
        check_notification(message)
        return
    if message.get("id", 0) is None and message.get("error", {}).get("code") in UNIDENTIFIABLE_REQUEST_CODES:
        message = {key: value for key, value in message.items() if key != "id"}
    if "error" in message:
        validate("JSONRPCErrorResponse", message)
        return
    result = message.get("result")
    task_definition = TASK_RESULT_DEFINITIONS.get(method)
    if method == "tools/call" and isinstance(result, dict) and result.get("resultType") == "task":
        task_definition = CREATE_TASK_RESULT
    if task_definition is not None:
        validate("JSONRPCResultResponse", message)
        validate(task_definition, result, TASKS)
        if method == "tasks/get" and isinstance(result, dict):
            check_inlined(result)
        return
    validate(RESPONSE_DEFINITIONS.get(method, "JSONRPCResultResponse"), message)


def check_notification(message: dict[str, Any]) -> None:
    """A server notification: the wire's own kinds, the extension's `notifications/tasks`, a listen's ack."""
    method = message.get("method")
    if method == TASK_NOTIFICATION:
        validate(TASK_NOTIFICATION_DEFINITION, message, TASKS)
        check_inlined(message["params"])
        return
    definition = _notification_definitions().get(str(method))
    if definition is None:
        raise jsonschema.ValidationError(f"{method!r} is not a notification a server sends")
    validate(definition, message)
    if method == ACKNOWLEDGED:
        validate(ACKNOWLEDGED_TASKS_DEFINITION, message["params"]["notifications"], TASKS)


def check_inlined(task: dict[str, Any]) -> None:
    """What a `DetailedTask` inlines, by the wire's definitions: a completed task's result is a `CallToolResult`."""
    if task.get("status") == "completed":
        validate("CallToolResult", task.get("result"))
    elif task.get("status") == "failed":
        validate("Error", task.get("error"))
    elif task.get("status") == "input_required":
        validate("InputRequests", task.get("inputRequests"))
