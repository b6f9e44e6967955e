"""`McpCall` from plain data (a scenario's `[[call]]`): every bad entry a clear error; checks; round names."""

from __future__ import annotations

import re
from typing import Any

import pytest

from mrtr_client import CallResult, CallTrace
from mrtr_locust.mcp_calls import CallSpecError, McpCall, check_calls, round_name, structured_is, text_is


def _result(structured: Any = None, text: str = "") -> CallResult:
    return CallResult({"content": [{"type": "text", "text": text}], "structuredContent": structured}, CallTrace())


def test_a_call_from_a_scenario_entry() -> None:
    call = McpCall.from_mapping(
        {"tool": "add_up", "arguments": {"numbers": [1, 2]}, "weight": 3, "task": True, "expect": {"structured": 3}}
    )
    assert (call.tool, call.weight, call.task, call.label) == ("add_up", 3, True, "add_up")
    assert call.check is not None
    assert call.check(_result(3)) is None
    assert call.check(_result(4)) == "structuredContent 4 != expected 3"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"arguments": {}}, "'tool' is missing"),
        ({"tool": ""}, "'tool' must be a non-empty string"),
        ({"tool": "t", "weight": 0}, "'weight' must be a whole number of at least 1, not 0"),
        ({"tool": "t", "weight": True}, "'weight' must be a whole number of at least 1"),
        ({"tool": "t", "task": "yes"}, "'task' must be true or false"),
        ({"tool": "t", "arguments": [1]}, "'arguments' must be a table"),
        ({"tool": "t", "answers": {"k": 3}}, "answer 'k' must be form content or an action string"),
        ({"tool": "t", "expect": {"structured": 1, "text": "1"}}, "'expect' takes exactly one of"),
        ({"tool": "t", "expect": {"text": 1}}, "expect.text must be a string"),
        ({"tool": "t", "wieght": 2}, "unknown keys ['wieght']"),
    ],
)
def test_a_bad_entry_is_named(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(CallSpecError, match=re.escape(message)):
        McpCall.from_mapping(entry)


def test_text_is_reads_the_first_text_block() -> None:
    assert text_is("6")(_result(text="6")) is None
    assert text_is("6")(_result(text="7")) == "text '7' != expected '6'"
    assert structured_is({"a": 1})(_result({"a": 1})) is None


@pytest.mark.parametrize(
    ("method", "reason", "asked", "name"),
    [
        ("tools/call", "input", True, "round:input_required"),
        ("tools/call", "input", False, "round:hand_back"),
        ("tools/call", "slice", False, "round:hand_back"),
        ("tools/call", "complete", False, "round:complete"),
        ("tools/call", "error", False, "round:error"),
        ("tools/call", "transport", False, "round:transport"),
        ("tasks/get", "complete", True, "task:poll"),
        ("tasks/update", "complete", False, "task:update"),
        ("tasks/cancel", "complete", False, "task:cancel"),
        ("subscriptions/listen", "listen", False, "task:listen"),
    ],
)
def test_each_exchange_has_a_statistics_name(method: str, reason: str, asked: bool, name: str) -> None:
    assert round_name(method, reason, asked) == name


def test_a_user_needs_calls_and_each_an_mcp_call() -> None:
    with pytest.raises(CallSpecError, match="SdkUser has no calls"):
        check_calls("SdkUser", [])
    with pytest.raises(CallSpecError, match=re.escape("SdkUser: each call must be an McpCall (data: McpCall.from")):
        check_calls("SdkUser", [McpCall("t"), {"tool": "t"}])
    check_calls("SdkUser", [McpCall("t")])
