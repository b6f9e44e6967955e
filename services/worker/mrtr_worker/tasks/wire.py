"""The tasks extension's names, as the released extension (SEP-2663) spells them.

Kept here, beside the worker's task code, until the fleet's shared wire module
(`mrtr_protocol`) carries them; the values are the extension's, not ours.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

EXTENSION_ID = "io.modelcontextprotocol/tasks"
TASK_RESULT_TYPE = "task"
TASKS_GET = "tasks/get"
TASKS_UPDATE = "tasks/update"
TASKS_CANCEL = "tasks/cancel"


class Status(StrEnum):
    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})


def iso(epoch_ms: int) -> str:
    """ISO 8601 in UTC with milliseconds, the form the extension's timestamps take."""
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
