"""The lean engine's side towards the workers: pooled keep-alive connections.

One asyncio Protocol per backend connection parses only the response head
(httptools) to learn the framing; body bytes go straight to the exchange that
owns the connection, which relays them to the client as they arrive. A
connection goes back to the pool only after a complete response the backend
did not mark ``Connection: close``.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from typing import Protocol, cast

import httptools
from yarl import URL

Headers = list[tuple[bytes, bytes]]


class Exchange(Protocol):
    """The receiver of one response (implemented by the lean proxy)."""

    def on_head(self, status: int, reason: bytes, headers: Headers, tokens: set[bytes]) -> None:
        """``tokens``: the header names the backend listed in ``Connection`` (hop-by-hop by declaration)."""

    def on_body(self, data: bytes) -> None: ...
    def on_complete(self) -> None: ...
    def on_lost(self, exc: BaseException) -> None: ...
    def flush(self) -> None: ...


def connection_tokens(headers: Headers) -> set[bytes]:
    """Header names the sender listed in ``Connection`` (hop-by-hop by declaration)."""
    tokens: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            tokens.update(token.strip().lower() for token in value.split(b","))
    return tokens


class UpstreamClosed(ConnectionError):
    """The backend closed the connection before the response was complete."""


class UpstreamConnection(asyncio.Protocol):
    """One keep-alive connection to a backend; carries one exchange at a time."""

    def __init__(self, release: Callable[[UpstreamConnection], None]) -> None:
        self._release = release
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.closed = False
        self.idle_since = time.monotonic()
        self.last_read = 0.0
        self._reason = b""
        self._headers: Headers = []
        self._framed = False
        self._head_seen = False
        self._tokens: set[bytes] = set()

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        exchange = self.exchange
        if exchange is None:  # bytes nobody asked for: the connection is not reusable
            self.abort()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.fail(exc)
            return
        exchange.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        exchange = self.exchange
        if exchange is None:
            return
        if self._head_seen and not self._framed:  # the body ran to the end of the connection
            self.exchange = None
            exchange.on_complete()
            exchange.flush()
            return
        self.exchange = None
        exchange.on_lost(exc or UpstreamClosed("backend closed the connection"))

    # -- httptools callbacks
    def on_message_begin(self) -> None:
        self._reason, self._headers, self._framed, self._head_seen = b"", [], False, False
        self._tokens = set()

    def on_status(self, reason: bytes) -> None:
        self._reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        lower = name.lower()
        if lower == b"content-length" or (lower == b"transfer-encoding" and b"chunked" in value.lower()):
            self._framed = True
        elif lower == b"connection":
            self._tokens.update(token.strip().lower() for token in value.split(b","))
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._head_seen = True
        status = self._parser.get_status_code()
        if status in (204, 304):
            self._framed = True
        if self.exchange is not None:
            self.exchange.on_head(status, self._reason, self._headers, self._tokens)

    def on_body(self, body: bytes) -> None:
        if self.exchange is not None:
            self.exchange.on_body(body)

    def on_message_complete(self) -> None:
        exchange, self.exchange = self.exchange, None
        keep = self._parser.should_keep_alive()
        if exchange is not None:
            exchange.on_complete()
            exchange.flush()
        if keep and not self.closed:
            self.idle_since = time.monotonic()
            self._parser = httptools.HttpResponseParser(self)
            self._release(self)
        else:
            self.close()

    # -- use
    def send(self, exchange: Exchange, request: bytes) -> None:
        assert self.transport is not None
        self.exchange = exchange
        self.last_read = time.monotonic()
        self.transport.write(request)

    def fail(self, exc: BaseException) -> None:
        """Give up on the current response (parse error, read timeout): the exchange learns why."""
        exchange, self.exchange = self.exchange, None
        self.abort()
        if exchange is not None:
            exchange.on_lost(exc)

    def pause(self, paused: bool) -> None:
        if self.transport is not None and not self.closed:
            if paused:
                self.transport.pause_reading()
            else:
                self.transport.resume_reading()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Drop the connection at once: never reuse one whose response was not read to the end."""
        self.exchange = None
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class UpstreamPool:
    """Idle keep-alive connections per backend URL, newest reused first."""

    def __init__(self, *, connect_timeout: float, keepalive: float) -> None:
        self._connect_timeout = connect_timeout
        self._keepalive = keepalive
        self._idle: dict[str, list[UpstreamConnection]] = {}
        self._ssl: ssl.SSLContext | None = None

    def take_idle(self, url: str) -> UpstreamConnection | None:
        """A live idle connection to ``url``, if the pool has one (no await: the fast path needs none)."""
        idle = self._idle.get(url)
        if not idle:
            return None
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if not conn.closed and now - conn.idle_since < self._keepalive:
                return conn
            conn.close()
        return None

    async def connect(self, url: str) -> UpstreamConnection:
        """A new connection to ``url`` (OSError/TimeoutError: the request was never delivered)."""
        parsed = URL(url)
        host, port = parsed.host or "", parsed.port or (443 if parsed.scheme == "https" else 80)
        secure = parsed.scheme == "https"
        if secure and self._ssl is None:
            self._ssl = ssl.create_default_context()
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self._connect_timeout):
            _, protocol = await loop.create_connection(
                lambda: UpstreamConnection(lambda conn: self._put(url, conn)),
                host,
                port,
                ssl=self._ssl if secure else None,
            )
        return protocol

    def _put(self, url: str, conn: UpstreamConnection) -> None:
        if self._keepalive <= 0:
            conn.close()
            return
        self._idle.setdefault(url, []).append(conn)

    def close(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
