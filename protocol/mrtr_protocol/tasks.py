"""The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) as the fleet speaks it: names, statuses, opt-in.

A client opts in per request by naming the extension in that request's
`clientCapabilities.extensions`; the server alone decides whether a
`tools/call` becomes a task (a flat `CreateTaskResult`, `resultType: "task"`)
or is answered at once. The task is then read with `tasks/get`, answered with
`tasks/update` and stopped with `tasks/cancel`, each naming it by `taskId`
(which also travels in the `Mcp-Name` header). No `requestState` exists on
the task wire; `tasks/result` and `tasks/list` are gone from the released
extension. Instead of polling, a client may push-subscribe: a
`subscriptions/listen` naming `notifications.taskIds` streams
`notifications/tasks` (the full `DetailedTask`) at every change.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

EXTENSION_ID = "io.modelcontextprotocol/tasks"
"""The key under `capabilities.extensions` (server) and `clientCapabilities.extensions` (client)."""

TASK_RESULT_TYPE = "task"
"""The `resultType` of a `CreateTaskResult`."""

TASKS_GET = "tasks/get"
TASKS_UPDATE = "tasks/update"
TASKS_CANCEL = "tasks/cancel"
TASK_METHODS: tuple[str, ...] = (TASKS_GET, TASKS_UPDATE, TASKS_CANCEL)
"""The extension's methods; each takes `params.taskId`."""

TASK_ID_PARAM = "taskId"

SUBSCRIPTIONS_LISTEN = "subscriptions/listen"
"""The long-lived POST whose response is a stream of change notifications (core, 2026-07-28)."""
LISTEN_TASK_IDS = "taskIds"
"""Under `params.notifications` of a listen: the tasks to push; in the ack's `notifications`: those honoured."""
TASKS_NOTIFICATION = "notifications/tasks"
"""The push on a listen stream: params are the task's full `DetailedTask` (what `tasks/get` would answer)."""
SUBSCRIPTIONS_ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
"""The first frame of a listen stream: the subset of the requested notifications the server honours."""
SUBSCRIPTION_ID_META_KEY = "io.modelcontextprotocol/subscriptionId"
"""On every frame of a listen stream (and its closing result): the listen request's JSON-RPC id."""

COMPUTE_META_KEY = "mrtr-cluster.dev/compute"
"""Vendor `_meta` key on a computation's result (a task's too): `{"steps", "slices", "visited"}`, where `visited`
lists `[instance, version]` per slice (the latest ones): the only place a client learns which workers did the
work (a poll says only who answered it)."""


class TaskStatus(StrEnum):
    """A task's `status`."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_STATUSES: frozenset[TaskStatus] = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})
"""Statuses a task never leaves."""


def with_tasks(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `capabilities` that also declares the tasks extension (other extensions are kept)."""
    declared = dict(capabilities)
    extensions = dict(declared.get("extensions") or {})
    extensions.setdefault(EXTENSION_ID, {})
    declared["extensions"] = extensions
    return declared


def declares_tasks(capabilities: Mapping[str, Any] | None) -> bool:
    """Whether a request's `clientCapabilities` opted in to tasks."""
    extensions = (capabilities or {}).get("extensions")
    return isinstance(extensions, Mapping) and EXTENSION_ID in extensions


def requires_tasks(error_data: Any) -> bool:
    """Whether a `-32021` error's `data` says the call can only be served as a task."""
    if not isinstance(error_data, Mapping):
        return False
    required = error_data.get("requiredCapabilities")
    return isinstance(required, Mapping) and declares_tasks(required)


def slice_workers(result: Mapping[str, Any]) -> list[tuple[str, int]]:
    """The `(instance, version)` of each slice a result's compute `_meta` names, in order; empty if none."""
    meta = result.get("_meta")
    compute = meta.get(COMPUTE_META_KEY) if isinstance(meta, Mapping) else None
    visited = compute.get("visited") if isinstance(compute, Mapping) else None
    if not isinstance(visited, list):
        return []
    pairs = []
    for entry in visited:
        if isinstance(entry, list | tuple) and len(entry) == 2 and isinstance(entry[0], str):
            version = entry[1]
            pairs.append((entry[0], version if isinstance(version, int) and not isinstance(version, bool) else 0))
    return pairs


_STATUS_VALUES = frozenset(status.value for status in TaskStatus)


def is_task_status(value: Any) -> bool:
    """Whether `value` is one of the five statuses the extension defines (anything else is a protocol error)."""
    return isinstance(value, str) and value in _STATUS_VALUES
