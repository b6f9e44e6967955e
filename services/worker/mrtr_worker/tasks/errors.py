"""The JSON-RPC errors of the task surface, each saying what happened and what to do."""

from __future__ import annotations

from mcp.shared.exceptions import MCPError
from mcp_types import HEADER_MISMATCH, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST

from mrtr_protocol.busy import RETRY_AFTER_KEY


def task_not_found(task_id: str) -> MCPError:
    """Unknown, expired, or another principal's task: one answer for all, so existence never leaks."""
    return MCPError(code=INVALID_PARAMS, message=f"Task not found: {task_id[:80]!r}", data={"reason": "unknown_task"})


def store_unavailable() -> MCPError:
    return MCPError(
        code=INTERNAL_ERROR,
        message="Task store unavailable (Redis unreachable); tasks cannot be created or read right now, "
        "other calls are unaffected; retry later",
        data={"reason": "task_store_unavailable", "retryable": True},
    )


def store_unconfirmed() -> MCPError:
    """A write the primary took but too few replicas confirmed (`MRTR_WORKER_REDIS_WAIT_REPLICAS`) in time."""
    return MCPError(
        code=INTERNAL_ERROR,
        message="Task store did not confirm the write on a replica in time (Redis WAIT); it is not acknowledged: "
        "it may or may not have been kept; retry later",
        data={"reason": "task_store_unconfirmed", "retryable": True},
    )


def task_limit(limit: int, retry_after_ms: int) -> MCPError:
    """The principal holds `limit` unfinished tasks. `retry_after_ms`: the tasks' poll interval, the soonest a
    client following its tasks learns that one ended (a place frees only then), so a clear refusal with a hint."""
    return MCPError(
        code=INVALID_REQUEST,
        message=f"Too many unfinished tasks for this principal (at most {limit}); "
        "wait for one to finish or cancel one, then try again",
        data={"reason": "task_limit", "max": limit, RETRY_AFTER_KEY: retry_after_ms},
    )


def name_mismatch(header: str | None, task_id: str) -> MCPError:
    if header is None:
        message = f"Mcp-Name header missing; it must equal params.taskId {task_id[:80]!r}"
        return MCPError(code=HEADER_MISMATCH, message=message)
    return MCPError(
        code=HEADER_MISMATCH,
        message=f"Mcp-Name header {header[:80]!r} does not match params.taskId {task_id[:80]!r}",
    )


def unreadable_task(task_id: str, detail: str) -> MCPError:
    return MCPError(
        code=INTERNAL_ERROR,
        message=f"Task {task_id[:80]!r} cannot be read by this worker ({detail})",
        data={"reason": "unreadable_task"},
    )


def unknown_job(job: str) -> MCPError:
    """A tool offered to become a task running a job no pack declares (a pack's mistake, not the caller's)."""
    return MCPError(
        code=INTERNAL_ERROR,
        message=f"This tool would run as task job {job[:80]!r}, which no installed pack declares "
        "(ToolPack.jobs); the call was not started",
        data={"reason": "unknown_job"},
    )
