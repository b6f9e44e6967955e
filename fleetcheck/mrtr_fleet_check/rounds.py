"""One MRTR round sent to one address, as bytes on the wire: what the directed probes are made of.

The load goes through `mrtr_client`, which follows a call to its end; a probe must instead choose
where each round lands (instance A, then B) and what state it carries (a tampered copy), so it
sends single rounds and reads what came back.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from mrtr_protocol import WORKER_ID_HEADER, events
from mrtr_protocol.wire import encode_request, request_headers, request_meta

_ids = itertools.count(1)


@dataclass(frozen=True)
class RoundReply:
    """What one round came back with: `input_required` (a state and/or questions), `complete` or `error`."""

    kind: str
    state: str | None = None
    questions: dict[str, dict[str, Any]] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    message: str | None = None
    """The server's error message (JSON-RPC error, or an HTTP status and body), for `error`."""
    instance: str | None = None


def send_round(
    http: httpx.Client,
    url: str,
    method: str,
    params: Mapping[str, Any],
    capabilities: Mapping[str, Any],
    *,
    responses: Mapping[str, Any] | None = None,
    state: str | None = None,
    token: str | None = None,
) -> RoundReply:
    call = {**params, "_meta": request_meta(capabilities)}
    if responses:
        call["inputResponses"] = dict(responses)
    if state is not None:
        call["requestState"] = state
    request_id = next(_ids)
    extra = {"Authorization": f"Bearer {token}"} if token else None
    try:
        reply = http.post(
            url, content=encode_request(request_id, method, call), headers=request_headers(method, params, extra)
        )
    except httpx.HTTPError as exc:
        return RoundReply("error", message=f"no answer: {type(exc).__name__}: {exc}")
    return read_reply(reply, request_id)


def read_reply(reply: httpx.Response, request_id: int) -> RoundReply:
    instance = reply.headers.get(WORKER_ID_HEADER)
    content_type = reply.headers.get("content-type", "")
    try:
        message = events.response(content_type, reply.content, request_id)
    except ValueError:
        message = None
    if message is None:
        return RoundReply("error", message=f"HTTP {reply.status_code}: {reply.text[:300]}", instance=instance)
    if "error" in message:
        error = message["error"] if isinstance(message["error"], dict) else {}
        return RoundReply("error", message=str(error.get("message", error)), instance=instance)
    result = message.get("result")
    if not isinstance(result, dict):
        return RoundReply("error", message=f"a response with no result: {str(message)[:300]}", instance=instance)
    if result.get("resultType") == "input_required":
        questions = result.get("inputRequests") or {}
        return RoundReply("input_required", result.get("requestState"), dict(questions), result, instance=instance)
    return RoundReply("complete", result=result, instance=instance)
