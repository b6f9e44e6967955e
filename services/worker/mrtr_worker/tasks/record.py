"""A task record: everything a task is, in one small JSON document sealed at rest.

The record is the only place a task lives: the instance that runs a slice
keeps nothing after it, so any instance can run the next one, and one that
dies mid-slice loses only that slice. Statuses move only along the
extension's graph (`working` <-> `input_required`, then one terminal status
for good); a move off that graph is a bug and raises.

Stored layout (`fmt`): format 1 is the only one so far. Like `requestState`
(`mrtr_worker.sealing.layout`), a worker reads the formats its version knows,
writes the one chosen, and carries top-level fields it does not know forward
untouched, so a later version can add fields during a rolling upgrade
(expand) before any version relies on them (contract). `pace` and `moves`
(the straggler rule) and `run_ms` (the run-time limit) are such optional
fields: absent until a slice writes them, carried forward by builds that do
not know them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from mrtr_protocol.rounds import COMPLETE
from mrtr_worker.sealing.layout import Pace
from mrtr_worker.tasks.wire import TASK_RESULT_TYPE, TERMINAL, Status, iso

RECORD_FORMAT = 1
READABLE_RECORD_FORMATS: dict[int, frozenset[int]] = {1: frozenset({1}), 2: frozenset({1})}
"""Record formats each worker version reads (version 2 adds none yet: the task layout is shared as is)."""

MAX_VISITED = 32

_MOVES: dict[Status, frozenset[Status]] = {
    Status.WORKING: frozenset({Status.WORKING, Status.INPUT_REQUIRED, *TERMINAL}),
    Status.INPUT_REQUIRED: frozenset({Status.INPUT_REQUIRED, Status.WORKING, Status.CANCELLED, Status.FAILED}),
    Status.COMPLETED: frozenset(),
    Status.FAILED: frozenset(),
    Status.CANCELLED: frozenset(),
}


class InvalidTransition(RuntimeError):
    """A status change the extension does not allow (a terminal task never changes)."""


class UnreadableRecord(ValueError):
    """A stored record this worker cannot interpret (a format it does not read, or a broken document)."""


@dataclass(frozen=True)
class TaskRecord:
    task_id: str
    principal: str | None
    job: str
    state: dict[str, Any]
    status: Status
    created_ms: int
    updated_ms: int
    ttl_ms: int
    poll_ms: int
    can_ask: bool = True
    """Whether the creating request declared form elicitation; if not, questions are taken as declined."""
    steps: int = 0
    slices: int = 0
    input_requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Outstanding questions, by task key (unique within the task)."""
    question_keys: dict[str, str] = field(default_factory=dict)
    """Task key -> the job's own key for that question."""
    keys_issued: int = 0
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    status_message: str | None = None
    visited: list[list[Any]] = field(default_factory=list)
    pace: Pace | None = None
    """The step rate the task's slices saw and its moves in a row off stragglers (`compute.policy`)."""
    moves: int = 0
    """Straggler moves over the task's life (shown in the result's `_meta`)."""
    run_ms: int = 0
    """Milliseconds the task's committed slices ran (what the run-time limit counts; waits for input do not)."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def moved(self, status: Status, now_ms: int, **changes: Any) -> TaskRecord:
        """This record in `status` (checked against the extension's graph), stamped `now_ms`."""
        if status not in _MOVES[self.status]:
            raise InvalidTransition(f"task {self.task_id}: {self.status} -> {status}")
        return replace(self, status=status, updated_ms=now_ms, **changes)

    def asking(self, questions: dict[str, dict[str, Any]], now_ms: int) -> TaskRecord:
        """Pause in input_required with `questions` (job key -> request) under fresh task keys, never reused."""
        issued = self.keys_issued
        requests: dict[str, dict[str, Any]] = {}
        keys: dict[str, str] = {}
        for job_key, request in questions.items():
            issued += 1
            task_key = f"{job_key}-{issued}"
            requests[task_key] = request
            keys[task_key] = job_key
        return self.moved(
            Status.INPUT_REQUIRED, now_ms, input_requests=requests, question_keys=keys, keys_issued=issued
        )

    def visit(self, instance_id: str, version: int) -> TaskRecord:
        visited = [*self.visited, [instance_id, version]][-MAX_VISITED:]
        return replace(self, visited=visited, slices=self.slices + 1)

    # Wire views.

    def _envelope(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status.value,
            "createdAt": iso(self.created_ms),
            "lastUpdatedAt": iso(self.updated_ms),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_ms,
        }
        if self.status_message is not None:
            wire["statusMessage"] = self.status_message
        return wire

    def create_result(self) -> dict[str, Any]:
        """The flat `CreateTaskResult`: the envelope and `resultType: "task"`, nothing inlined."""
        return {"resultType": TASK_RESULT_TYPE, **self._envelope()}

    def detailed(self) -> dict[str, Any]:
        """The `DetailedTask` of `tasks/get`: the envelope with what its status inlines."""
        wire = self._envelope()
        if self.status is Status.INPUT_REQUIRED:
            wire["inputRequests"] = dict(self.input_requests)
        elif self.status is Status.COMPLETED and self.result is not None:
            # The inlined result has the tool's own result shape, and every 2026-07-28 result carries
            # `resultType`; records stored by older builds lack it, so the wire view adds it.
            wire["result"] = {"resultType": COMPLETE, **self.result}
        elif self.status is Status.FAILED and self.error is not None:
            wire["error"] = self.error
        return wire

    # Stored layout.

    def to_document(self) -> dict[str, Any]:
        doc: dict[str, Any] = dict(self.extra)
        doc.update(
            fmt=RECORD_FORMAT,
            id=self.task_id,
            principal=self.principal,
            job=self.job,
            state=self.state,
            status=self.status.value,
            created=self.created_ms,
            updated=self.updated_ms,
            ttl=self.ttl_ms,
            poll=self.poll_ms,
            can_ask=self.can_ask,
            steps=self.steps,
            slices=self.slices,
            requests=self.input_requests,
            qkeys=self.question_keys,
            issued=self.keys_issued,
            result=self.result,
            error=self.error,
            message=self.status_message,
            visited=self.visited,
        )
        if self.pace is not None:  # optional fields: older builds carry them forward untouched
            doc["pace"] = self.pace.wire()
        if self.moves:
            doc["moves"] = self.moves
        if self.run_ms:
            doc["run_ms"] = self.run_ms
        return doc

    @classmethod
    def from_document(cls, doc: dict[str, Any], readable: frozenset[int]) -> TaskRecord:
        doc = dict(doc)
        fmt = doc.pop("fmt", None)
        if type(fmt) is not int or fmt not in readable:
            raise UnreadableRecord(f"task record format {fmt!r}; this worker reads {sorted(readable)}")
        try:
            record = cls(
                task_id=str(doc.pop("id")),
                principal=doc.pop("principal"),
                job=str(doc.pop("job")),
                state=dict(doc.pop("state")),
                status=Status(doc.pop("status")),
                created_ms=int(doc.pop("created")),
                updated_ms=int(doc.pop("updated")),
                ttl_ms=int(doc.pop("ttl")),
                poll_ms=int(doc.pop("poll")),
                can_ask=bool(doc.pop("can_ask")),
                steps=int(doc.pop("steps")),
                slices=int(doc.pop("slices")),
                input_requests=dict(doc.pop("requests")),
                question_keys=dict(doc.pop("qkeys")),
                keys_issued=int(doc.pop("issued")),
                result=doc.pop("result"),
                error=doc.pop("error"),
                status_message=doc.pop("message"),
                visited=list(doc.pop("visited")),
                pace=Pace.parse(doc.pop("pace", None)),  # a hint: one this build does not understand is dropped
                moves=int(doc.pop("moves", 0)),
                run_ms=int(doc.pop("run_ms", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise UnreadableRecord(f"malformed task record ({exc})") from None
        return replace(record, extra=doc)
