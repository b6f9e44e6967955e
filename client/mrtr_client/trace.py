"""What happened to one call: a hop per HTTP exchange, the questions the user was asked, and a task's polls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mrtr_protocol.tasks import TASKS_NOTIFICATION, TERMINAL_STATUSES


@dataclass(frozen=True)
class Hop:
    """One HTTP exchange of a call: where it landed and why that round ended.

    `reason` is the server's (`input`, `admission`, `pressure`, `slice`,
    `drain`), or `complete`, `error`, `task` (the server made the call a
    task; what followed is in `CallTrace.task_exchanges`), or `transport`
    (not delivered, or no answer; the client retried with its last state).
    """

    instance: str | None
    version: str | None
    reason: str
    http_status: int | None
    elapsed_ms: float
    state_bytes: int = 0
    detail: str | None = None


@dataclass(frozen=True)
class Question:
    """One input request the server sent, and which round (or, in a task, which poll) it came in."""

    key: str
    method: str
    round: int


@dataclass(frozen=True)
class TaskSnapshot:
    """A task as the server last described it (`CreateTaskResult` or `tasks/get`), and the worker that answered."""

    task_id: str
    status: str
    status_message: str | None
    created_at: str | None
    last_updated_at: str | None
    ttl_ms: int | None
    poll_interval_ms: int | None
    input_requests: dict[str, Any]
    """The outstanding questions (status `input_required`), by key."""
    result: dict[str, Any] | None
    """The tool's result (status `completed`; `isError: true` tool results included)."""
    error: dict[str, Any] | None
    """The JSON-RPC error object (status `failed`)."""
    instance: str | None
    """The worker that answered this read (`X-Worker-Id`), not necessarily the one running the task."""
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


@dataclass(frozen=True)
class TaskExchange:
    """One exchange about a task: its creation (`tools/call`), a poll, an answer (`tasks/update`) or a cancel.

    `snapshot` is the task as that reply described it (creation and polls);
    `waited_s` counts the time spent polling and sleeping since the task was
    created (not the time a person took to answer).
    """

    method: str
    task_id: str
    instance: str | None
    version: str | None
    http_status: int | None
    elapsed_ms: float
    waited_s: float
    snapshot: TaskSnapshot | None = None
    detail: str | None = None

    @property
    def status(self) -> str | None:
        return self.snapshot.status if self.snapshot is not None else None


@dataclass
class CallTrace:
    hops: list[Hop] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    task_id: str | None = None
    """Set when the server made the call a task."""
    task_exchanges: list[TaskExchange] = field(default_factory=list)

    @property
    def polls(self) -> list[TaskExchange]:
        """The task's `tasks/get` exchanges, in order."""
        return [x for x in self.task_exchanges if x.method == "tasks/get"]

    @property
    def pushes(self) -> list[TaskExchange]:
        """The task's changes as pushed on a `subscriptions/listen` stream (`notifications/tasks`), in order."""
        return [x for x in self.task_exchanges if x.method == TASKS_NOTIFICATION]

    @property
    def instances(self) -> list[str]:
        """Distinct instances that answered a round or a task exchange, in order of first visit."""
        seen: dict[str, None] = {}
        for where in [hop.instance for hop in self.hops] + [x.instance for x in self.task_exchanges]:
            if where is not None:
                seen.setdefault(where)
        return list(seen)

    @property
    def versions(self) -> list[str]:
        seen: dict[str, None] = {}
        for hop in self.hops:
            if hop.version is not None:
                seen.setdefault(hop.version)
        return list(seen)

    @property
    def reasked(self) -> list[str]:
        """Keys asked more than once in this call (a correct server never re-asks an answered key)."""
        counts: dict[str, int] = {}
        for q in self.questions:
            counts[q.key] = counts.get(q.key, 0) + 1
        return [key for key, n in counts.items() if n > 1]


@dataclass(frozen=True)
class CallResult:
    """The complete result of a call and how it got there."""

    result: dict[str, Any]
    trace: CallTrace

    @property
    def task_id(self) -> str | None:
        """The task the server made of the call, if it made one."""
        return self.trace.task_id

    @property
    def is_error(self) -> bool:
        return self.result.get("isError") is True

    @property
    def structured(self) -> Any:
        return self.result.get("structuredContent")

    @property
    def text(self) -> str:
        """The text blocks of a tool result, joined."""
        return "\n".join(
            block.get("text", "") for block in self.result.get("content", []) if block.get("type") == "text"
        )
