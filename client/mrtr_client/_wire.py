"""What this client adds to the fleet's wire (`mrtr_protocol`): who it is, and its errors for a reply it cannot read."""

from __future__ import annotations

from typing import Any

from mrtr_client.errors import ProtocolViolation
from mrtr_protocol import events

CLIENT_INFO = {"name": "mrtr-client", "version": "0.1.0"}
"""The `clientInfo` every request of this client carries in its `_meta`."""


def parse_reply(content_type: str, body: bytes, request_id: int) -> dict[str, Any]:
    """The JSON-RPC message that answers `request_id`, from a JSON or server-sent-events body.

    A JSON body is the answer whatever its id (an error to an unreadable request has none);
    an event stream must carry the response to `request_id`.
    """
    if events.EVENT_STREAM in content_type:
        message = events.response(content_type, body, request_id)
        if message is None:
            raise ProtocolViolation(f"event stream ended without a response to request {request_id}")
        return message
    try:
        found = events.messages(content_type, body)
    except ValueError:
        raise ProtocolViolation(f"response is not JSON: {body[:80]!r}") from None
    if not found:
        raise ProtocolViolation("response is not a JSON-RPC object")
    return found[0]
