"""Answers written as raw HTTP/1.1 bytes, on either listener.

The JSON-RPC error body every refusal carries, a complete small response (errors,
admin answers) and the one answer of a connection over the cap: the public and
the admin listener both answer with these, so a refusal reads the same on each.
"""

from __future__ import annotations

import asyncio
import http
import json
from collections.abc import Sequence
from typing import cast

from mrtr_lb.bounds import LINGER, TOO_MANY_CONNECTIONS

JSON = "application/json; charset=utf-8"

MAX_LINGERING = 256
"""Refused connections (over the cap) that may linger at once; more are closed right after their 503."""


def jsonrpc_error_body(message: str, code: int = -32603, request_id: str | int | None = None) -> bytes:
    """A small JSON-RPC error body: MCP clients parse it instead of choking on HTML.

    `request_id`: the id of the request it answers, when one could be read (`request_id_of`); JSON-RPC's null
    otherwise, which MCP's schema does not allow in an error response, so a client may refuse to read it.
    """
    error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return json.dumps(error).encode()


def request_id_of(body: bytes) -> str | int | None:
    """The JSON-RPC id of a request body, or None (not JSON, a batch, a notification, an id of another type).

    Read only to answer a request the proxy could not forward: routing never looks at the body."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    found = message.get("id") if isinstance(message, dict) else None
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


def simple_response(
    status: int,
    body: bytes,
    content_type: str,
    *,
    keep_alive: bool,
    head: bool = False,
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> bytes:
    """A complete response with a known length (errors, admin answers)."""
    phrase = http.HTTPStatus(status).phrase if status in http.HTTPStatus._value2member_map_ else ""
    lines = [
        b"HTTP/1.1 %d %s\r\n" % (status, phrase.encode()),
        b"Content-Type: %s\r\n" % content_type.encode(),
        b"Content-Length: %d\r\n" % len(body),
    ]
    lines += [b"%s: %s\r\n" % pair for pair in extra]
    if not keep_alive:
        lines.append(b"Connection: close\r\n")
    lines.append(b"\r\n")
    if not head:
        lines.append(body)
    return b"".join(lines)


class Overloaded(asyncio.Protocol):
    """A connection over the cap: one 503 and a FIN at once, its bytes dropped, closed after a moment.

    These linger (closing at once with unread bytes would reset the connection and could
    destroy the answer at the client), but only so many at once (``lingering``, shared by
    the listener): past that, one is closed right after its answer.
    """

    def __init__(self, retry_after: int, lingering: set[Overloaded], max_lingering: int) -> None:
        self._retry_after = retry_after
        self._lingering = lingering
        self._max_lingering = max_lingering
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        real = self._transport = cast(asyncio.Transport, transport)
        body = jsonrpc_error_body(TOO_MANY_CONNECTIONS)
        extra = [(b"Retry-After", str(self._retry_after).encode())]
        real.write(simple_response(503, body, JSON, keep_alive=False, extra=extra))
        if len(self._lingering) >= self._max_lingering:
            real.close()
            return
        self._lingering.add(self)
        if real.can_write_eof():
            real.write_eof()
        asyncio.get_running_loop().call_later(LINGER, real.abort)

    def data_received(self, data: bytes) -> None:
        pass

    def connection_lost(self, exc: Exception | None) -> None:
        self._lingering.discard(self)
