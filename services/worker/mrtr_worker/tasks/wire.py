"""The tasks extension's names, from the fleet's one home for the wire (`mrtr_protocol.tasks`), and its timestamps.

Re-exported under the names the worker's task modules use, so nothing here spells a wire value again.
"""

from __future__ import annotations

from datetime import UTC, datetime

from mrtr_protocol.tasks import (
    EXTENSION_ID,
    TASK_RESULT_TYPE,
    TASKS_CANCEL,
    TASKS_GET,
    TASKS_UPDATE,
    TERMINAL_STATUSES,
)
from mrtr_protocol.tasks import TaskStatus as Status

TERMINAL = TERMINAL_STATUSES

__all__ = ["EXTENSION_ID", "TASKS_CANCEL", "TASKS_GET", "TASKS_UPDATE", "TASK_RESULT_TYPE", "TERMINAL", "Status", "iso"]


def iso(epoch_ms: int) -> str:
    """ISO 8601 in UTC with milliseconds, the form the extension's timestamps take."""
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
