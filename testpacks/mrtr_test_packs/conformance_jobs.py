"""Jobs behind the conformance suite's task fixtures (the `conformance` pack's tools that become tasks).

They only wait (an asynchronous sleep in steps of `WAIT_STEP_MS`), so a
cancel lands within one step and they take no compute slot. They are the
pack's `ToolPack.jobs`, so every worker with this package installed can run
or resume them, whichever instance created the task.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_types import INTERNAL_ERROR

from mrtr_worker.plugin import InputRequestWire, Job, State, StepRunner, TaskFailure, form, form_answer, text_result

WAIT_STEP_MS = 100
"""One step of a waiting job: how soon it notices a cancel or a drain."""


async def _wait(state: State, runner: StepRunner) -> State:
    todo = min(WAIT_STEP_MS, state["remaining_ms"])
    await asyncio.sleep(todo / 1000)
    return {**state, "remaining_ms": state["remaining_ms"] - todo}


def _waited(state: State) -> bool:
    return bool(state["remaining_ms"] <= 0)


def _waiting(milliseconds: int, **extra: Any) -> State:
    return {"remaining_ms": max(0, int(milliseconds)), **extra}


# slow_compute(seconds, label): waits, then says so.

SLOW_COMPUTE = Job(
    "slow_compute",
    lambda a: _waiting(int(float(a["seconds"]) * 1000), label=a.get("label"), seconds=a["seconds"]),
    _wait,
    _waited,
    lambda s: text_result(f"slow_compute finished after {s['seconds']} s (label {s['label']!r})"),
)


def slow_compute_text(seconds: float, label: str | None) -> str:
    """The same text when the call is answered at once (no task)."""
    return f"slow_compute finished after {seconds} s (label {label!r})"


# failing_job: a tool error after about a second (completed + isError).

FAILING_JOB = Job(
    "failing_job",
    lambda a: _waiting(1000),
    _wait,
    _waited,
    lambda s: text_result("failing_job failed, as it always does (a tool error, not a protocol error)", error=True),
)


def _protocol_error(state: State) -> dict[str, Any]:
    raise TaskFailure(INTERNAL_ERROR, "protocol_error_job hit an internal error, as it always does")


PROTOCOL_ERROR_JOB = Job("protocol_error_job", lambda a: _waiting(300), _wait, _waited, _protocol_error)


# Questions inside a task.


def _confirm_request(filename: str) -> InputRequestWire:
    return form(f"Delete {filename}?", {"confirm": {"type": "boolean", "title": "Delete"}}, ["confirm"])


def _confirm_questions(state: State) -> dict[str, InputRequestWire]:
    return {} if state["confirm"] is not None else {"confirm": _confirm_request(state["filename"])}


def _confirm_answer(state: State, key: str, answer: Any) -> State | None:
    read = form_answer(answer, _confirm_request(state["filename"])) if key == "confirm" else None
    if read is None:
        return None
    accepted, content = read
    return {**state, "confirm": bool(accepted and content and content.get("confirm") is True)}


def _confirm_result(state: State) -> dict[str, Any]:
    verb = "Deleted" if state["confirm"] else "Kept"
    return text_result(f"{verb} {state['filename']}", {"filename": state["filename"], "deleted": state["confirm"]})


CONFIRM_DELETE = Job(
    "confirm_delete",
    lambda a: _waiting(200, filename=str(a["filename"]), confirm=None),
    _wait,
    lambda s: s["confirm"] is not None and _waited(s),
    _confirm_result,
    _confirm_questions,
    _confirm_answer,
)

MULTI_REQUESTS: dict[str, InputRequestWire] = {
    "name": form("What name should the record have?", {"name": {"type": "string"}}, ["name"]),
    "confirm": form("Create the record?", {"confirm": {"type": "boolean"}}, ["confirm"]),
}


def _multi_questions(state: State) -> dict[str, InputRequestWire]:
    return {key: request for key, request in MULTI_REQUESTS.items() if state["answers"].get(key) is None}


def _multi_answer(state: State, key: str, answer: Any) -> State | None:
    request = MULTI_REQUESTS.get(key)
    read = None if request is None else form_answer(answer, request)
    if read is None:
        return None
    accepted, content = read
    value = content.get(key) if accepted and content else f"({answer.get('action')})"
    return {**state, "answers": {**state["answers"], key: value}}


MULTI_INPUT = Job(
    "multi_input",
    lambda a: _waiting(100, answers={}),
    _wait,
    lambda s: not _multi_questions(s) and _waited(s),
    lambda s: text_result(f"multi_input: name={s['answers']['name']}, confirm={s['answers']['confirm']}", s["answers"]),
    _multi_questions,
    _multi_answer,
)

# The composition: the name came from an MRTR round (`test_tool_with_task`), the task does the rest.

GREET_LATER = Job(
    "greet_later",
    lambda a: _waiting(300, name=str(a["name"])),
    _wait,
    _waited,
    lambda s: text_result(f"Hello, {s['name']}! (said by a task, after the MRTR round that asked your name)"),
)

JOBS = (SLOW_COMPUTE, FAILING_JOB, PROTOCOL_ERROR_JOB, CONFIRM_DELETE, MULTI_INPUT, GREET_LATER)
"""The conformance pack's task jobs, in the order its tools are declared."""
