"""What a task runs: a job is a resumable computation over a small JSON state, advanced one step at a time.

The runner calls, at every step boundary: `questions` (anything to ask the
user now? the task pauses in input_required), `done`, then `advance`. The
state is the checkpoint written to the store at the end of each slice, so a
job must keep everything it needs in it (as a `Computation` already does).
Compute steps run on the engine's process pool (through a `StepRunner`, the engine); a job that only
waits (the conformance fixtures) sleeps on the event loop instead and takes
no compute slot.

`result` returns the tool result (a `CallToolResult` wire dict; `isError` for
a tool error, which ends `completed`), or raises `TaskFailure` for a
protocol-level error, which ends `failed`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import jsonschema

from mrtr_worker.compute.computation import Computation, State
from mrtr_worker.tool_api.inputs import InputRequestWire


class StepRunner(Protocol):
    """Runs a pure, CPU-bound step off the event loop (the engine's process pool)."""

    async def run_step(self, step: Callable[[State], State], state: State) -> State: ...


class TaskFailure(Exception):
    """A protocol-level failure of the job: the task ends `failed` with this JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def error(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            wire["data"] = self.data
        return wire


def _no_questions(state: State) -> dict[str, InputRequestWire]:
    return {}


def _no_answers(state: State, key: str, answer: Any) -> State | None:
    return None


@dataclass(frozen=True)
class Job:
    name: str
    initial: Callable[[dict[str, Any]], State]
    advance: Callable[[State, StepRunner], Awaitable[State]]
    done: Callable[[State], bool]
    result: Callable[[State], dict[str, Any]]
    questions: Callable[[State], dict[str, InputRequestWire]] = field(default=_no_questions)
    """Questions to ask at this boundary, by the job's own keys (the runner gives each a fresh task key)."""
    answer: Callable[[State, str, Any], State | None] = field(default=_no_answers)
    """Fold the wire answer to one question into the state; None if the answer is unusable (asked again)."""
    computes: bool = False
    """Its steps run on the engine's pool: a slice holds a compute slot, so MRTR admission sees it (and vice versa)."""
    max_run_ms: int = 0
    """The job's own run-time limit, if tighter than the fleet's (`MRTR_WORKER_TASK_MAX_RUN_MS`); 0: the fleet's."""


def form_answer(answer: Any, request: InputRequestWire) -> tuple[bool, dict[str, Any] | None] | None:
    """Read a form answer from `tasks/update`: (True, content) for a valid accept, (False, None) for a
    decline or cancel, None for anything unusable (a malformed or schema-breaking answer)."""
    if not isinstance(answer, Mapping):
        return None
    action = answer.get("action")
    if action in ("decline", "cancel"):
        return False, None
    if action != "accept":
        return None
    content = answer.get("content")
    if not isinstance(content, Mapping):
        return None
    try:
        jsonschema.validate(dict(content), request["params"]["requestedSchema"])
    except jsonschema.ValidationError:
        return None
    return True, dict(content)


def text_result(text: str, structured: dict[str, Any] | None = None, *, error: bool = False) -> dict[str, Any]:
    wire: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if structured is not None:
        wire["structuredContent"] = structured
    if error:
        wire["isError"] = True
    return wire


def compute_job(computation: Computation, name: str | None = None) -> Job:
    """A compute-pack computation as a task job: same state, same steps, same result as the MRTR path."""

    async def advance(state: State, runner: StepRunner) -> State:
        return await runner.run_step(computation.step, state)

    def questions(state: State) -> dict[str, InputRequestWire]:
        question = computation.question(state)
        return {} if question is None else {question.key: question.request}

    def answer(state: State, key: str, wire: Any) -> State | None:
        question = computation.question(state)
        if question is None or question.key != key:
            return None
        read = form_answer(wire, question.request)
        if read is None:
            return None
        return question.apply(state, read[1])

    def result(state: State) -> dict[str, Any]:
        value = computation.result(state)
        return text_result(json.dumps(value), value)

    return Job(
        name or computation.name, computation.initial, advance, computation.done, result, questions, answer, True
    )
