"""Reading reply bodies: JSON, and server-sent event streams as the spec frames them."""

from __future__ import annotations

import json

import pytest

from mrtr_protocol import events

SSE = "text/event-stream"
JSON = "application/json"
PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 50}}
FINAL = {"jsonrpc": "2.0", "id": 3, "result": {"content": []}}


def _stream(*data: object, end: str = "\n") -> str:
    return "".join(f"event: message{end}data: {json.dumps(d)}{end}{end}" for d in data)


def test_each_events_data_in_order() -> None:
    assert events.event_data("data: a\n\ndata: b\n\n") == ["a", "b"]


def test_multi_line_data_is_joined_by_newlines_and_one_leading_space_dropped() -> None:
    assert events.event_data("data: one\ndata:two\ndata:  three\n\n") == ["one\ntwo\n three"]


@pytest.mark.parametrize("end", ["\r\n", "\r", "\n"])
def test_any_line_end_frames_events(end: str) -> None:
    text = f"data: a{end}data: b{end}{end}data: c{end}{end}"
    assert events.event_data(text) == ["a\nb", "c"]


def test_comments_other_fields_and_dataless_events_are_ignored() -> None:
    text = ": keep-alive\n\nevent: ping\nid: 7\nretry: 100\n\n: note\ndata: x\nid: 8\n\n"
    assert events.event_data(text) == ["x"]


def test_a_data_line_without_a_colon_is_empty_data() -> None:
    assert events.event_data("data\ndata: x\n\n") == ["\nx"]


def test_a_json_body_is_its_one_object() -> None:
    assert events.messages(JSON, json.dumps(FINAL).encode()) == [FINAL]
    assert events.messages("application/json; charset=utf-8", json.dumps(FINAL)) == [FINAL]


@pytest.mark.parametrize("body", [b"[1, 2]", b'"text"', b"null"])
def test_a_json_body_that_is_no_object_has_no_messages(body: bytes) -> None:
    assert events.messages(JSON, body) == []


@pytest.mark.parametrize(
    ("body", "problem"),
    [(b"", "Expecting value"), (b"<html>", "Expecting value"), (b'{"a": ', "Expecting value"), (b'"\xff"', "utf-8")],
)
def test_a_json_body_that_is_not_json_is_a_value_error(body: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        events.messages(JSON, body)


def test_an_event_stream_skips_events_that_are_not_json_objects() -> None:
    body = "data: not json\n\ndata: [1]\n\n" + _stream(PROGRESS) + 'data: {"half": \n\n'
    assert events.messages(SSE, body.encode()) == [PROGRESS]


def test_an_event_stream_with_json_split_over_data_lines() -> None:
    text = json.dumps(FINAL, indent=1)
    body = "".join(f"data: {line}\r\n" for line in text.splitlines()) + "\r\n"
    assert events.messages(SSE, body.encode()) == [FINAL]


def test_the_response_is_the_last_result_or_error_not_a_notification() -> None:
    body = _stream(PROGRESS, FINAL, PROGRESS, end="\r\n")
    assert events.response(f"{SSE}; charset=utf-8", body.encode()) == FINAL


def test_the_response_is_picked_by_id() -> None:
    other = {"jsonrpc": "2.0", "id": 4, "error": {"code": -1, "message": "m"}}
    body = _stream(FINAL, other).encode()
    assert events.response(SSE, body) == other
    assert events.response(SSE, body, request_id=3) == FINAL
    assert events.response(SSE, body, request_id=4) == other
    assert events.response(SSE, body, request_id="3") is None


def test_no_response_is_none() -> None:
    assert events.response(SSE, _stream(PROGRESS).encode()) is None
    assert events.response(SSE, b"") is None
    assert events.response(JSON, json.dumps(PROGRESS).encode()) is None


def test_a_json_error_without_an_id_is_the_response_unless_an_id_is_asked_for() -> None:
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
    assert events.response(JSON, json.dumps(error).encode()) == error
    assert events.response(JSON, json.dumps(error).encode(), request_id=1) is None


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (FINAL, True),
        ({"jsonrpc": "2.0", "id": None, "error": {}}, True),
        (PROGRESS, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {}}, False),
    ],
)
def test_is_response(message: dict[str, object], expected: bool) -> None:
    assert events.is_response(message) is expected
