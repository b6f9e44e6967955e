"""Reading a reply body, JSON or a server-sent event stream, into its JSON-RPC messages.

A worker may answer a POST with `application/json` or with
`text/event-stream` (notifications first, the response last). Every reader of
replies in this repository (the client, the Locust recorder, the tests, the
benchmarks) goes through here, so they agree on what a reply said.
"""

from __future__ import annotations

import json
from typing import Any

EVENT_STREAM = "text/event-stream"


def event_data(text: str) -> list[str]:
    """The `data` of each event in an event-stream text, in order.

    Events end at a blank line (LF, CRLF or CR line ends); an event's `data:`
    lines are joined by newlines, one space after the colon is dropped, and
    comments (`:`) and other fields (`event:`, `id:`, `retry:`) are ignored.
    An event without data yields nothing.
    """
    found = []
    for event in text.replace("\r\n", "\n").replace("\r", "\n").split("\n\n"):
        lines = [_field_value(line) for line in event.split("\n") if line == "data" or line.startswith("data:")]
        if lines:
            found.append("\n".join(lines))
    return found


def _field_value(line: str) -> str:
    value = line.partition(":")[2]
    return value[1:] if value.startswith(" ") else value


def messages(content_type: str, body: bytes | str) -> list[dict[str, Any]]:
    """Every JSON object in a reply: the body itself, or each event's data (unparseable events are skipped).

    Raises `ValueError` when a JSON body is not JSON (invalid UTF-8 included).
    """
    if EVENT_STREAM not in content_type:
        parsed = json.loads(body)
        return [parsed] if isinstance(parsed, dict) else []
    found = []
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    for data in event_data(text):
        try:
            parsed = json.loads(data)
        except ValueError:
            continue
        if isinstance(parsed, dict):
            found.append(parsed)
    return found


def is_response(message: dict[str, Any]) -> bool:
    """True for a JSON-RPC response (a result or an error), false for requests and notifications."""
    return "result" in message or "error" in message


def response(content_type: str, body: bytes | str, request_id: int | str | None = None) -> dict[str, Any] | None:
    """The JSON-RPC response in a reply (to `request_id` if given, else the last one), or None.

    Raises `ValueError` when a JSON body is not JSON.
    """
    finals = [m for m in messages(content_type, body) if is_response(m)]
    if request_id is not None:
        finals = [m for m in finals if m.get("id") == request_id]
    return finals[-1] if finals else None
