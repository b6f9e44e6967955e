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

    def on_head(self, status: int, head: bytes, lower: bytes) -> None:
        """``head``: the response head as the backend sent it, status line and header lines, each ending
        in CRLF, without the blank line; ``lower``: the same, lower-cased (for finding header names)."""

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


def header_value(head: bytes, lower: bytes, name: bytes) -> bytes | None:
    """The first value of header ``name`` (``b"\\r\\n"`` + lower-case name + ``b":"``) in a raw head, stripped."""
    start = lower.find(name)
    if start < 0:
        return None
    start += len(name)
    end = head.find(b"\r\n", start)
    return head[start : end if end >= 0 else len(head)].strip()


def split_head(head: bytes) -> tuple[bytes, Headers]:
    """The first line and the (name, value) pairs of a raw head (the slow paths only)."""
    first, *lines = head.split(b"\r\n")
    headers: Headers = []
    for line in lines:
        if line:
            name, _, value = line.partition(b":")
            headers.append((name, value.strip()))
    return first, headers


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
        self._pending = b""
        """What arrived of the current response before its head was complete (the head is taken from it)."""
        self._framed = False
        self._head_seen = False

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        exchange = self.exchange
        if exchange is None:  # bytes nobody asked for: the connection is not reusable
            self.abort()
            return
        if not self._head_seen:
            self._pending = self._pending + data if self._pending else data
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

    # -- httptools callbacks (no on_header: the head is passed on as the backend sent it, see on_headers_complete)
    def on_message_begin(self) -> None:
        self._framed, self._head_seen = False, False

    def on_headers_complete(self) -> None:
        self._head_seen = True
        pending, self._pending = self._pending.lstrip(b"\r\n"), b""
        end = pending.find(b"\r\n\r\n")
        head = pending[: end + 2] if end >= 0 else pending
        lower = head.lower()
        status = self._parser.get_status_code()
        self._framed = (
            status in (204, 304)
            or b"\r\ncontent-length:" in lower
            or (
                b"\r\ntransfer-encoding:" in lower
                and b"chunked" in (header_value(head, lower, b"\r\ntransfer-encoding:") or b"").lower()
            )
        )
        if self.exchange is not None:
            self.exchange.on_head(status, head, lower)

    def on_body(self, body: bytes) -> None:
        if self.exchange is not None:
            self.exchange.on_body(body)

    def on_message_complete(self) -> None:
        exchange, self.exchange = self.exchange, None
        keep = self._parser.should_keep_alive()
        if exchange is not None:
            exchange.on_complete()
            exchange.flush()
        if keep and not self.closed:  # the parser, between messages now, reads the next response as it is
            self.idle_since = time.monotonic()
            self._release(self)
        else:
            self.close()

    # -- use
    def send(self, exchange: Exchange, request: bytes) -> None:
        assert self.transport is not None
        self.exchange = exchange
        self._head_seen, self._pending = False, b""
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
