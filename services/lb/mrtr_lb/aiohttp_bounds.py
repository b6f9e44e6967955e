"""The aiohttp engine's public listener within the same bounds as the lean engine's (:mod:`bounds`).

aiohttp limits lines and fields (answering 400) and closes idle connections,
but has no cap on a whole head, no deadline for a head or a body and no cap
on connections. :class:`GuardedHandler` adds them in front of aiohttp's own
parser: a second httptools parser that keeps nothing but the framing follows
the bytes, so the answers are the lean engine's (431, 408, 503 and a close),
with one difference: a bound hit while an earlier pipelined request is still
being answered cuts the connection instead of answering after it.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import httptools
from aiohttp import web, web_protocol

from .admin import JSON, jsonrpc_error_body
from .bounds import LINGER, Limits, head_bytes_in
from .lean_http import Overloaded, simple_response

MAX_LINGERING = 256


class _Framing:
    """Callbacks of the second parser: where each request's head and body begin and end."""

    def __init__(self, guard: GuardedHandler) -> None:
        self._guard = guard

    def on_message_begin(self) -> None:
        self._guard.bound_begin()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._guard.bound_header()

    def on_headers_complete(self) -> None:
        self._guard.bound_head_done()

    def on_body(self, body: bytes) -> None:
        self._guard.bound_body(len(body))

    def on_message_complete(self) -> None:
        self._guard.bound_complete()


class GuardedHandler(web_protocol.RequestHandler):
    """aiohttp's connection handler with the head cap, the head and body deadlines of :class:`Limits`."""

    def __init__(self, manager: web.Server, *, limits: Limits, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._limits = limits
        self._framing: httptools.HttpRequestParser | None = httptools.HttpRequestParser(_Framing(self))
        self._in_head = True
        self._head_bytes = 0
        self._headers = 0
        self._tail = b""
        self._begun = False
        self._requests = 0
        self._size = 0
        self._head_since: float | None = None
        self._body_since: float | None = None
        self._stopped = False
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
            try:
                self._framing.feed_data(data)
            except (httptools.HttpParserError, httptools.HttpParserUpgrade):
                self._framing = None  # aiohttp answers what it cannot parse; an upgrade is refused by the proxy
            if self._stopped:
                return
            if self._begun:
                self._unfinished()
            if self._in_head:
                self._tail = data[-3:]
        super().data_received(data)

    # -- the second parser's callbacks
    def bound_begin(self) -> None:
        self._begun, self._headers, self._size = True, 0, 0

    def bound_header(self) -> None:
        self._headers += 1
        if self._headers > self._limits.max_headers:
            self._refuse(431, self._limits.too_many_headers())
            raise _Stop

    def bound_head_done(self) -> None:
        self._in_head = False
        self._head_bytes, self._head_since, self._tail = 0, None, b""

    def bound_body(self, size: int) -> None:
        self._size += size

    def bound_complete(self) -> None:
        self._begun, self._in_head, self._body_since = False, True, None
        self._requests += 1

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

    def _check(self) -> None:
        """A late head or body gets 408; a new connection that sent nothing is closed; idle ones are aiohttp's."""
        self._timer = None
        if self._stopped or self._raw is None or self._raw.is_closing():
            return
        now, limits = self._loop.time(), self._limits
        if self._body_since is not None and not self._in_head:
            at = limits.body_deadline(self._body_since, self._size)
            if now >= at:
                self._refuse(408, limits.body_too_slow())
                return
        elif self._head_since is not None and (self._begun or self._requests == 0):
            at = self._head_since + limits.head_timeout
            if now >= at:
                if not self._begun and not self._busy():
                    self._stopped = True
                    self._raw.close()
                else:
                    self._refuse(408, limits.head_too_slow())
                return
        else:
            return  # between requests: aiohttp's keep-alive timeout; the next partial read arms this again
        self._arm(at)

    # -- refusing
    def _busy(self) -> bool:
        return bool(self._request_in_progress or self._messages)

    def _refuse(self, status: int, message: str) -> None:
        """Answer, send a FIN, drop what still comes for a moment, close; cut instead if a response is running."""
        self._stopped = True
        raw = self._raw
        if raw is None or raw.is_closing():
            return
        if self._busy():
            raw.close()
            return
        raw.write(simple_response(status, jsonrpc_error_body(message, -32600), JSON, keep_alive=False))
        if raw.can_write_eof():
            raw.write_eof()
        self._loop.call_later(LINGER, raw.abort)


class _Stop(Exception):
    """Stops the second parser from inside a callback."""


class GuardedServer(web.Server):
    """aiohttp's server whose connections are :class:`GuardedHandler`; over the cap, a 503 and a close."""

    def __init__(self, *args: Any, limits: Limits, retry_after: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits = limits
        self._retry_after = retry_after
        self._lingering: set[Overloaded] = set()

    def __call__(self) -> web_protocol.RequestHandler:
        if len(self._connections) >= self._limits.max_connections:
            return cast(web_protocol.RequestHandler, Overloaded(self._retry_after, self._lingering, MAX_LINGERING))
        return GuardedHandler(self, loop=self._loop, limits=self._limits, **self._kwargs)


class GuardedRunner(web.AppRunner):
    """An AppRunner whose server is :class:`GuardedServer` (aiohttp's own limits set no lower than ours)."""

    def __init__(self, app: web.Application, *, limits: Limits, retry_after: int, **kwargs: Any) -> None:
        kwargs.update(
            max_line_size=limits.max_head,
            max_field_size=limits.max_head,
            max_headers=limits.max_headers + 1,
            keepalive_timeout=limits.keepalive_timeout,
        )
        super().__init__(app, **kwargs)
        self._limits = limits
        self._retry_after = retry_after

    async def _make_server(self) -> web.Server:
        plain = await super()._make_server()
        return GuardedServer(
            plain.request_handler,
            request_factory=plain.request_factory,
            handler_cancellation=plain.handler_cancellation,
            loop=plain._loop,
            limits=self._limits,
            retry_after=self._retry_after,
            **plain._kwargs,
        )
