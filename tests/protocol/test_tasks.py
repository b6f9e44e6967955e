"""The tasks extension's names and the opt-in helpers."""

from __future__ import annotations

from typing import Any

import pytest

from mrtr_protocol.tasks import (
    COMPUTE_META_KEY,
    EXTENSION_ID,
    TASK_METHODS,
    TERMINAL_STATUSES,
    TaskStatus,
    declares_tasks,
    is_task_status,
    requires_tasks,
    slice_workers,
    with_tasks,
)
from mrtr_protocol.wire import NAMED_METHODS, request_headers


def test_the_extension_and_its_methods_have_their_released_names() -> None:
    assert EXTENSION_ID == "io.modelcontextprotocol/tasks"
    assert TASK_METHODS == ("tasks/get", "tasks/update", "tasks/cancel")
    assert {s.value for s in TERMINAL_STATUSES} == {"completed", "failed", "cancelled"}
    assert [s.value for s in TaskStatus] == ["working", "input_required", "completed", "failed", "cancelled"]


def test_declaring_tasks_keeps_the_other_capabilities_and_extensions_and_copies() -> None:
    caps: dict[str, Any] = {"elicitation": {}, "extensions": {"other/ext": {"x": 1}}}
    declared = with_tasks(caps)
    assert declared == {"elicitation": {}, "extensions": {"other/ext": {"x": 1}, EXTENSION_ID: {}}}
    assert caps == {"elicitation": {}, "extensions": {"other/ext": {"x": 1}}}
    assert declares_tasks(declared)
    assert not declares_tasks(caps)
    assert not declares_tasks(None)
    assert with_tasks(declared) == declared


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"requiredCapabilities": {"extensions": {EXTENSION_ID: {}}}}, True),
        ({"requiredCapabilities": {"elicitation": {}}}, False),
        ({"requiredCapabilities": "tasks"}, False),
        (None, False),
    ],
)
def test_a_missing_capability_error_names_tasks_when_it_does(data: Any, expected: bool) -> None:
    assert requires_tasks(data) is expected


def test_only_the_five_statuses_are_statuses() -> None:
    assert is_task_status("input_required")
    assert not is_task_status("submitted")
    assert not is_task_status(None)


@pytest.mark.parametrize("method", TASK_METHODS)
def test_task_methods_name_the_task_in_mcp_name(method: str) -> None:
    assert NAMED_METHODS[method] == "taskId"
    headers = request_headers(method, {"taskId": "t-123", "inputResponses": {}})
    assert headers["Mcp-Name"] == "t-123"
    assert headers["Mcp-Method"] == method


def test_the_workers_of_a_results_slices_are_read_defensively() -> None:
    result = {"_meta": {COMPUTE_META_KEY: {"steps": 2, "visited": [["w1", 1], ["w2", 2], "junk", [3, 1]]}}}
    assert slice_workers(result) == [("w1", 1), ("w2", 2)]
    assert slice_workers({"_meta": {COMPUTE_META_KEY: {"visited": "w1"}}}) == []
    assert slice_workers({"content": []}) == []
