"""The reference engine's public listener within the same bounds as the lean engine's (:mod:`mrtr_lb.bounds`).

aiohttp limits lines and fields (answering 400) and closes idle connections,
but has no cap on a whole head, no deadline for a head or a body and no cap
on connections. :class:`GuardedHandler` adds them in front of aiohttp's own
parser: a second httptools parser that keeps nothing but the framing follows
the bytes and answers every refusal itself, before aiohttp sees the bytes
(a malformed request 400, a head too large 431, a body too large 413, a late
head or body 408, one connection too many 503, each then closed), so the
answers are the lean engine's; aiohttp only ever parses requests that passed.
One difference: a bound hit while an earlier pipelined request is still being
answered, or arrived in the same read, cuts the connection instead of answering
after it (the lean engine answers the earlier requests, then refuses).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import unquote

import httptools
from aiohttp import web, web_protocol

from mrtr_lb.answers import JSON, MAX_LINGERING, Overloaded, jsonrpc_error_body, simple_response
from mrtr_lb.bounds import LINGER, Limits, head_bytes_in

Refused = Callable[[str, str, str | None, str | None, int], None]
"""Told of each refusal (method, path, Mcp-Method, Mcp-Name, status): the access log and metrics, as the lean
engine records a refused request."""


class _Framing:
    """Callbacks of the second parser: where each request's head and body begin and end."""

    def __init__(self, guard: GuardedHandler) -> None:
        self._guard = guard
        self.parser = httptools.HttpRequestParser(self)

    def on_message_begin(self) -> None:
        self._guard.bound_begin()

    def on_url(self, url: bytes) -> None:
        self._guard.bound_target(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._guard.bound_header(name, value)

    def on_headers_complete(self) -> None:
        self._guard.bound_head_done(self.parser)

    def on_body(self, body: bytes) -> None:
        self._guard.bound_body(len(body))

    def on_message_complete(self) -> None:
        self._guard.bound_complete()


class GuardedHandler(web_protocol.RequestHandler):
    """aiohttp's connection handler with the head cap, the head and body deadlines of :class:`Limits`."""

    def __init__(self, manager: web.Server, *, limits: Limits, refused: Refused, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._limits = limits
        self._refused = refused
        self._method = ""
        self._mcp: dict[bytes, str] = {}
        self._framing: httptools.HttpRequestParser | None = _Framing(self).parser
        self._in_head = True
        self._head_bytes = 0
        self._headers = 0
        self._tail = b""
        self._begun = False
        self._requests = 0
        self._size = 0
        self._length = 0
        self._hosts = 0
        self._parsed = 0
        self._target = b""
        self._head_since: float | None = None
        self._body_since: float | None = None
        self._stopped = False
        self._completed_unfed = 0
        """Requests complete in the read being looked at, which aiohttp has not been given yet."""
        self._paused_since: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._raw: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._raw = cast(asyncio.Transport, transport)
        super().connection_made(transport)
        self._head_since = now = self._loop.time()
        self._arm(now + self._limits.head_timeout)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._stopped:
            return
        if self._framing is not None:
            if self._in_head:
                self._head_bytes += head_bytes_in(data, self._tail)
                if self._head_bytes > self._limits.max_head:
                    self._refuse(431, self._limits.head_too_large())
                    return
            self._completed_unfed = 0
            try:
                self._framing.feed_data(data)
            except httptools.HttpParserUpgrade:
                self._framing = None  # a complete request: the application refuses it (one answer, then a close)
            except httptools.HttpParserError as exc:
                if not self._stopped:
                    self._refuse(400, f"malformed request: {exc}")
            if self._stopped:
                return
            if self._begun:
                self._unfinished()
            if self._in_head:
                self._tail = data[-3:]
        super().data_received(data)
        self._completed_unfed = 0  # aiohttp has them now

    # -- the second parser's callbacks
    def bound_begin(self) -> None:
        self._begun, self._headers, self._size, self._length, self._hosts, self._parsed = True, 0, 0, 0, 0, 0
        self._target, self._method, self._mcp = b"", "", {}

    def bound_target(self, url: bytes) -> None:
        if len(self._target) < 1024:
            self._target += url[: 1024 - len(self._target)]
        self._parsed += len(url)
        if self._parsed > self._limits.max_head:
            self._stop(431, self._limits.head_too_large())

    def bound_header(self, name: bytes, value: bytes) -> None:
        self._headers += 1
        self._parsed += len(name) + len(value) + 4
        if self._parsed > self._limits.max_head:  # a pipelined head that the byte count did not see whole
            self._stop(431, self._limits.head_too_large())
        if self._headers > self._limits.max_headers:
            self._stop(431, self._limits.too_many_headers())
        size = len(name)
        if size == 14 and name.lower() == b"content-length" and value.strip().isdigit():
            self._length = int(value)
        elif size == 4 and name.lower() == b"host":
            self._hosts += 1
        elif size == 10 or size == 8:
            lower = name.lower()
            if lower in (b"mcp-method", b"mcp-name"):
                self._mcp[lower] = value[:200].decode("latin-1")

    def bound_head_done(self, parser: httptools.HttpRequestParser) -> None:
        self._in_head = False
        self._head_bytes, self._head_since, self._tail = 0, None, b""
        self._method = parser.get_method().decode("ascii", "replace")
        if self._hosts != 1 and (self._hosts or parser.get_http_version() == "1.1"):
            self._stop(400, "a request needs exactly one Host header" if self._hosts else "no Host header")
        target = self._target.lower()
        if not (target.startswith((b"/", b"http://", b"https://")) or parser.get_method() == b"CONNECT"):
            self._stop(400, "malformed request: the target is neither a path nor an absolute URL")
        if self._length > self._limits.max_body:
            self._stop(413, f"request body larger than {self._limits.max_body} bytes")

    def bound_body(self, size: int) -> None:
        self._size += size
        if self._size > self._limits.max_body:
            self._stop(413, f"request body larger than {self._limits.max_body} bytes", current_body=True)

    def bound_complete(self) -> None:
        self._begun, self._in_head, self._body_since = False, True, None
        self._requests += 1
        self._completed_unfed += 1

    # -- deadlines
    def _unfinished(self) -> None:
        now = self._loop.time()
        if self._in_head:
            if self._head_since is None:
                self._head_since = now
                self._arm(now + self._limits.head_timeout)
        elif self._body_since is None:
            self._body_since = now
            self._arm(self._limits.body_deadline(now, self._size))

    def _arm(self, at: float) -> None:
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer_at = at
        self._timer = self._loop.call_at(at, self._check)

    def pause_writing(self) -> None:
        super().pause_writing()
        self._paused_since = now = self._loop.time()
        self._arm(now + self._limits.send_timeout)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._paused_since = None

    def _check(self) -> None:
        """A late head or body gets 408; a new connection that sent nothing is closed; idle ones are aiohttp's;
        a client that reads nothing for the send timeout is cut."""
        self._timer = None
        raw = self._raw
        if raw is None:
            return
        now, limits = self._loop.time(), self._limits
        paused = self._paused_since
        if paused is not None:
            if now >= paused + limits.send_timeout:
                self._stopped = True
                raw.abort()  # a close would wait for the client to read what is buffered
                return
            self._arm(paused + limits.send_timeout)
        if self._stopped or raw.is_closing():
            return
        if self._body_since is not None and not self._in_head:
            at = limits.body_deadline(self._body_since, self._size)
            if now >= at:
                self._refuse(408, limits.body_too_slow(), current_body=True)
                return
        elif self._head_since is not None and (self._begun or self._requests == 0):
            at = self._head_since + limits.head_timeout
            if now >= at:
                if not self._begun and not self._busy():
                    self._stopped = True
                    raw.close()
                else:
                    self._refuse(408, limits.head_too_slow())
                return
        else:
            return  # between requests: aiohttp's keep-alive timeout; the next partial read arms this again
        self._arm(at)

    # -- refusing
    def _busy(self) -> bool:
        return bool(self._request_in_progress or self._messages)

    def _stop(self, status: int, message: str, *, current_body: bool = False) -> None:
        """Refuse from inside a callback of the second parser, and stop it."""
        self._refuse(status, message, current_body=current_body)
        raise _Stop

    def _refuse(self, status: int, message: str, *, current_body: bool = False) -> None:
        """Answer, send a FIN, drop what still comes for a moment, close; cut instead if a response is running.

        ``current_body``: the refusal is about the body the running request is reading (nothing was answered
        to it yet, and aiohttp gets no more of it), so the answer goes out even though a request runs.
        """
        self._stopped = True
        raw = self._raw
        if raw is None or raw.is_closing():
            return
        if self._begun:
            path = unquote(self._target.partition(b"?")[0].decode("latin-1"))
            self._refused(self._method, path, self._mcp.get(b"mcp-method"), self._mcp.get(b"mcp-name"), status)
        if self._completed_unfed or self._messages or (self._request_in_progress and not current_body):
            raw.close()  # an answer now would be taken for the answer to an earlier request
            return
        raw.write(simple_response(status, jsonrpc_error_body(message, -32600), JSON, keep_alive=False))
        if raw.can_write_eof():
            raw.write_eof()
        self._loop.call_later(LINGER, raw.abort)


class _Stop(Exception):
    """Stops the second parser from inside a callback."""


class GuardedServer(web.Server):
    """aiohttp's server whose connections are :class:`GuardedHandler`; over the cap, a 503 and a close."""

    def __init__(self, *args: Any, limits: Limits, retry_after: int, refused: Refused, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits = limits
        self._retry_after = retry_after
        self._refused = refused
        self._lingering: set[Overloaded] = set()

    def __call__(self) -> web_protocol.RequestHandler:
        if len(self._connections) >= self._limits.max_connections:
            return cast(web_protocol.RequestHandler, Overloaded(self._retry_after, self._lingering, MAX_LINGERING))
        return GuardedHandler(self, loop=self._loop, limits=self._limits, refused=self._refused, **self._kwargs)


class GuardedRunner(web.AppRunner):
    """An AppRunner whose server is :class:`GuardedServer` (aiohttp's own limits set no lower than ours)."""

    def __init__(
        self, app: web.Application, *, limits: Limits, retry_after: int, refused: Refused, **kwargs: Any
    ) -> None:
        kwargs.update(
            max_line_size=limits.max_head,
            max_field_size=limits.max_head,
            max_headers=limits.max_headers + 1,
            keepalive_timeout=limits.keepalive_timeout,
        )
        super().__init__(app, **kwargs)
        self._limits = limits
        self._retry_after = retry_after
        self._refused = refused

    async def _make_server(self) -> web.Server:
        plain = await super()._make_server()
        return GuardedServer(
            plain.request_handler,
            request_factory=plain.request_factory,
            handler_cancellation=plain.handler_cancellation,
            loop=plain._loop,
            limits=self._limits,
            retry_after=self._retry_after,
            refused=self._refused,
            **plain._kwargs,
        )
