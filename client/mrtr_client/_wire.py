"""What this client adds to the fleet's wire (`mrtr_protocol`): who it is, and its errors for a reply it cannot read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mrtr_client.errors import ProtocolViolation
from mrtr_protocol import events
from mrtr_protocol.wire import encode_request

CLIENT_INFO = {"name": "mrtr-client", "version": "0.1.0"}
"""The `clientInfo` every request of this client carries in its `_meta`."""


def parse_reply(content_type: str, body: bytes, request_id: int) -> dict[str, Any]:
    """The JSON-RPC message that answers `request_id`, from a JSON or server-sent-events body.

    The answer is a JSON-RPC 2.0 response: a result answers with the request's own id, an error with
    it or with null (a request the server or a proxy could not read); an event stream must carry the
    response to `request_id`.
    """
    if events.EVENT_STREAM in content_type:
        for sent in events.messages(content_type, body):
            refuse_server_request(sent, "the response stream")
        message = events.response(content_type, body, request_id)
        if message is None:
            raise ProtocolViolation(f"event stream ended without a response to request {request_id}")
        return _checked(message, request_id)
    try:
        found = events.messages(content_type, body)
    except ValueError:
        raise ProtocolViolation(f"response is not JSON: {body[:80]!r}") from None
    if not found:
        raise ProtocolViolation("response is not a JSON-RPC object")
    return _checked(found[0], request_id)


def refuse_server_request(message: dict[str, Any], where: str) -> None:
    """A server MUST NOT send JSON-RPC requests on a stream (it asks through `input_required` instead)."""
    if "method" in message and "id" in message:
        raise ProtocolViolation(f"the server sent a request ({message['method']!r}) on {where}; it MUST NOT")


def _checked(message: dict[str, Any], request_id: int) -> dict[str, Any]:
    if message.get("jsonrpc") != "2.0":
        raise ProtocolViolation(f"response is not JSON-RPC 2.0 (jsonrpc {message.get('jsonrpc')!r})")
    answered = message.get("id")
    if "result" in message and "error" in message:
        raise ProtocolViolation(f"response to request {request_id} has both a result and an error")
    if "result" in message and answered != request_id:
        raise ProtocolViolation(f"result for request {answered!r} in answer to request {request_id}")
    if "error" in message and answered not in (request_id, None):
        raise ProtocolViolation(f"error for request {answered!r} in answer to request {request_id}")
    return message


class RoundBodies:
    """The bodies of one request's rounds, byte for byte what `mrtr_protocol.wire.encode_request` makes of them.

    Every round resends the same params and `_meta` with a new id, the answers
    just gathered and the last `requestState`, so those are encoded once and
    each round splices in what changed (a hop's body is mostly the state).
    Params that carry `inputResponses` or `requestState` of their own keep the
    full encoding, since the round's values then take those keys' places.
    """

    def __init__(self, method: str, params: Mapping[str, Any]) -> None:
        self._method, self._params = method, dict(params)
        self._splice = not (_ROUND_KEYS & self._params.keys())
        self._head = b'{"jsonrpc": "2.0", "id": '
        self._middle = f', "method": {json.dumps(method)}, "params": {json.dumps(self._params)[:-1]}'.encode()

    def body(self, request_id: int, responses: Mapping[str, Any] | None, state: str | None) -> bytes:
        if not self._splice:
            return encode_request(request_id, self._method, self.params(responses, state))
        tail = ""
        if responses is not None:
            tail += f', "inputResponses": {json.dumps(responses)}'
        if state is not None:
            tail += f', "requestState": {json.dumps(state)}'
        return b"%s%s%s%s}}" % (self._head, json.dumps(request_id).encode(), self._middle, tail.encode())

    def params(self, responses: Mapping[str, Any] | None, state: str | None) -> dict[str, Any]:
        """The round's params as a dict (what the body encodes)."""
        call_params = dict(self._params)
        if responses is not None:
            call_params["inputResponses"] = responses
        if state is not None:
            call_params["requestState"] = state
        return call_params


_ROUND_KEYS = frozenset({"inputResponses", "requestState"})
