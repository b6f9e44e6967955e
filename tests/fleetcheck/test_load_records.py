"""The check's record of a call, from what `McpUser` saw: an answer, a clear error, or a lost call."""

from __future__ import annotations

import json
from typing import Any

from mrtr_client import CallResult
from mrtr_client.trace import CallTrace
from mrtr_fleet_check.load import CallRecord, as_json, record_of
from mrtr_locust import McpCallRecord


def _seen(**outcome: Any) -> McpCallRecord:
    fields: dict[str, Any] = {
        "tool": "add_up",
        "name": "add_up",
        "arguments": {"numbers": [1, 2]},
        "task": False,
        "rounds": [],
        "round_ms": [],
        "questions": [],
        "instances": [],
        "result": None,
        "error": None,
        "error_code": None,
        "elapsed_ms": 1.0,
    }
    return McpCallRecord(**{**fields, **outcome})


def test_a_refused_call_is_an_error_with_the_servers_message_and_the_places_it_met() -> None:
    seen = _seen(
        rounds=["round:input_required", "round:error"],
        questions=["confirm"],
        instances=["w1", "w2"],
        versions=["1", "2"],
        last_version="2",
        error="JSON-RPC error -32602: Invalid or expired requestState",
        error_code=-32602,
        error_message="Invalid or expired requestState",
    )
    record = record_of(seen)
    assert record.error == "Invalid or expired requestState"
    assert record.lost is None
    assert not record.completed
    assert (record.instances, record.versions, record.finished_by) == (["w1", "w2"], ["1", "2"], "2")
    assert (record.rounds, record.hand_backs, record.questions) == (1, 0, {"confirm": 1})


def test_a_call_that_broke_on_the_way_is_lost_not_an_error() -> None:
    record = record_of(_seen(rounds=["round:transport"], error="RetryBudgetExhausted: gave up"))
    assert (record.error, record.lost) == (None, "RetryBudgetExhausted: gave up")
    assert (record.instances, record.versions, record.finished_by) == ([], [], None)


def test_an_answer_counts_its_hand_backs_and_survives_the_trip_through_json() -> None:
    result = CallResult({"structuredContent": {"total": 3}, "content": [{"type": "text", "text": "3"}]}, CallTrace())
    seen = _seen(
        rounds=["round:hand_back", "round:input_required", "round:hand_back", "round:complete"],
        questions=["confirm"],
        result=result,
        last_version="1",
    )
    record = record_of(seen)
    assert (record.rounds, record.hand_backs) == (3, 2)
    assert record.completed
    assert (record.structured, record.finished_by) == ({"total": 3}, "1")
    assert CallRecord(**json.loads(as_json(record))) == record
