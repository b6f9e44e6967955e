"""How a tool call becomes a task: the rule, and the hand-off from the tool to the extension.

The rule: a tool declares whether it supports tasks (`optional` or
`required`). A `tools/call` of such a tool whose request declares the tasks
extension (`clientCapabilities.extensions`) becomes a task; without the
declaration an optional tool answers as before (MRTR rounds, or at once) and
a required one gets -32021. A tool may still answer at once or ask MRTR
questions first, even when the extension is declared: it becomes a task only
when it calls `TaskOffer.become`, which is how a tool composes the two
(questions by MRTR rounds, then the long work as a task).

The tool runs first (so the SDK validates its arguments and the requestState
boundary opens its state); the extension's interceptor sets an `Escalation`
in a context variable before calling it and turns a recorded escalation into
the `CreateTaskResult` once the record is in the store.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from mcp_types import CallToolResult, TextContent


class TaskSupport(StrEnum):
    OPTIONAL = "optional"
    REQUIRED = "required"


@dataclass
class Escalation:
    """Filled by the tool when its call should become a task running `job` from `arguments`."""

    job: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)


_CURRENT: ContextVar[Escalation | None] = ContextVar("mrtr_task_escalation", default=None)


class TaskOffer:
    """Given to a tool whose call may become a task."""

    def __init__(self, escalation: Escalation) -> None:
        self._escalation = escalation

    def become(self, job: str, arguments: dict[str, Any]) -> CallToolResult:
        """Make this call a task running `job`; the returned placeholder is replaced by the CreateTaskResult."""
        self._escalation.job, self._escalation.arguments = job, dict(arguments)
        return CallToolResult(content=[TextContent(type="text", text=f"becoming a task ({job})")])


def offer() -> TaskOffer | None:
    """A `TaskOffer` when this call may become a task (tasks on, the tool declared, the extension declared)."""
    escalation = _CURRENT.get()
    return None if escalation is None else TaskOffer(escalation)


def offering(escalation: Escalation) -> Any:
    """Set the escalation for the tool about to run; returns the token to reset."""
    return _CURRENT.set(escalation)


def withdraw(token: Any) -> None:
    _CURRENT.reset(token)


class TaskTools:
    """Which tools support tasks, declared by the packs; and whether this worker has a task store at all."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self._support: dict[str, TaskSupport] = {}

    def declare(self, tool: str, support: TaskSupport) -> None:
        self._support[tool] = support

    def support(self, tool: str) -> TaskSupport | None:
        return self._support.get(tool)

    def unavailable(self, tool: str) -> CallToolResult:
        """What a task-only tool answers on a worker without a task store (the extension is not advertised)."""
        text = f"{tool} runs only as a task, and this worker has no task store (MRTR_WORKER_REDIS_URL is unset)"
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
