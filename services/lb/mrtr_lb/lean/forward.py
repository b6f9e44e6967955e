"""One client request through the lean engine, driven by protocol callbacks: no task, no future.

A request whose backend has an idle pooled connection is written to it at
once, from the client protocol's callback; the backend protocol's callbacks
relay the response and end the request, which starts the client's next one.
Only opening a connection (or waiting for a connection slot) needs a task.
The contract is :mod:`mrtr_lb.rules`': retry on another
backend only when the connection could not be opened; once the request was
written a failure is a 502, or a cut stream once the head went out; a request
the health checker abandons gets a 504.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time

from mrtr_lb.access import access_head as log_head
from mrtr_lb.access import access_log, emit_access
from mrtr_lb.backends import Backend
from mrtr_lb.lean.http import ClientConnection, LeanRequest
from mrtr_lb.lean.proxy import LeanProxy
from mrtr_lb.lean.upstream import UpstreamConnection, connection_tokens, header_value, split_head
from mrtr_lb.rules import (
    ABANDONED,
    HOP_BY_HOP,
    UNRESPONSIVE,
    Outcome,
    connect_failed,
    no_backend,
    upstream_failed,
)

_HOP = frozenset(name.encode() for name in HOP_BY_HOP)
_NO_BODY_STATUS = frozenset({204, 304})
_HOP_LINE = re.compile(b"\r\n(?:%s)[ \t]*:" % b"|".join(re.escape(name) for name in sorted(_HOP)))
"""A hop-by-hop header line in a lower-cased head: such a head is rebuilt, any other passed on as it is."""


def access_head(req: LeanRequest, path: str, backend: str) -> str:
    """The access-log line's start (``access.access_head``), kept on the header block ``req`` went out with."""
    entry = req.sent_with
    if entry is None or entry.backend is not backend:  # never sent (rejected, no backend): look the fields up
        return log_head(req.method, path, req.text(b"mcp-method"), req.text(b"mcp-name"), backend)
    if entry.log_method is not req.method or entry.log_path is not path:
        entry.log_head = log_head(req.method, path, req.text(b"mcp-method"), req.text(b"mcp-name"), backend)
        entry.log_method, entry.log_path = req.method, path
    return entry.log_head


class Forward:
    """Picks a backend, sends, relays the response, records; ends exactly once with ``client.done``.

    Output of one upstream read is gathered and written with one call (head
    and first body bytes together), so a small response costs one write.
    """

    __slots__ = (
        "__weakref__",
        "_backend",
        "_buffer",
        "_chunked",
        "_client",
        "_ended",
        "_head",
        "_hold",
        "_out",
        "_path",
        "_proxy",
        "_req",
        "_slot",
        "_started",
        "_task",
        "_tried",
        "clean",
        "conn",
        "head_sent",
    )  # fmt: skip

    def __init__(self, proxy: LeanProxy, client: ClientConnection, req: LeanRequest, path: str) -> None:
        self._proxy = proxy
        self._client = client
        self._req = req
        self._path = path
        self._started = time.perf_counter()
        self._out = Outcome()
        self._tried: list[Backend] = []
        self._backend: Backend | None = None
        self._slot = False
        self._task: asyncio.Task[None] | None = None
        self.conn: UpstreamConnection | None = None
        self._buffer: list[bytes] = []
        self._chunked = False
        self._head: tuple[bytes, bytes] | None = None
        """The backend's head as sent and lower-cased, when passed on unchanged: the log reads the worker id from it."""
        self._hold = False
        """The head waits for the first body bytes (a known non-empty length): one write instead of two."""
        self._ended = False
        self.head_sent = False
        self.clean = False
        """The backend's response was read to its end (the connection may be reused)."""

    def run(self) -> None:
        self._client.handler = self
        if self._req.reject is not None:
            status, message = self._req.reject
            self._out.status, self._out.result = status, "rejected"
            self._proxy.error(self._client, self._req, status, message, code=-32600)
            self._end()
            return
        self._next()

    # -- attempts
    def _next(self) -> None:
        """Try the next backend in turn; answer 503 when none is left."""
        proxy, out = self._proxy, self._out
        backend = proxy.pool.pick(self._tried)
        if backend is None:
            out.status, out.result = 503, "no_backend"
            retry = str(proxy.settings.retry_after).encode()
            proxy.error(self._client, self._req, 503, no_backend(len(self._tried)), extra=[(b"Retry-After", retry)])
            self._end()
            return
        if self._tried:
            proxy.metrics.backend_retries.labels(self._tried[-1].url).inc()
            self._tried[-1].retries += 1
        self._tried.append(backend)
        out.backend = backend.url
        out.attempts += 1
        self._enter(backend)
        conn = None
        limit = proxy.limit
        if limit is None or limit.try_acquire():
            self._slot = limit is not None
            conn = proxy.upstream.take_idle(backend.url)
        if conn is not None:
            self._send(conn)
        else:
            self._task = asyncio.get_running_loop().create_task(self._open(backend))

    async def _open(self, backend: Backend) -> None:
        """The slow path: wait for a connection slot if capped, open a new connection."""
        proxy = self._proxy
        try:
            conn = None
            if not self._slot and proxy.limit is not None:
                await proxy.limit.acquire()
                self._slot = True
                conn = proxy.upstream.take_idle(backend.url)  # the slot's last holder may have left one
            if conn is None:
                conn = await proxy.upstream.connect(backend.url)
        except (OSError, TimeoutError) as exc:
            self._task = None
            proxy.count_error(backend, "connect", exc)
            proxy.pool.set_health(backend, False, connect_failed(exc))
            self._leave()
            self._next()
            return
        self._task = None
        if self._ended:  # cancelled just as the connection opened
            conn.close()
            return
        self._send(conn)

    def _enter(self, backend: Backend) -> None:
        self._backend = backend
        backend.in_flight += 1
        backend.requests += 1
        self._proxy.metrics.count_request(backend.url)
        backend.pending.add(self)

    def _leave(self) -> None:
        backend, self._backend = self._backend, None
        if backend is None:
            return
        backend.in_flight -= 1
        backend.pending.discard(self)
        if self._slot and self._proxy.limit is not None:
            self._slot = False
            self._proxy.limit.release()

    def _send(self, conn: UpstreamConnection) -> None:
        assert self._backend is not None
        self.conn = conn
        client = self._client
        client.upstream = conn
        if client.writing_paused:
            conn.pause(True)
        self._proxy.active.add(self)
        conn.send(self, self._proxy.request_bytes(self._req, self._backend, client))

    def _end(self) -> None:
        if self._ended:
            return
        self._ended = True
        conn, self.conn = self.conn, None
        client = self._client
        if conn is not None:
            self._proxy.active.discard(self)
            if client.upstream is conn:
                client.upstream = None
            if not self.clean:
                conn.abort()  # never reuse a connection whose response was not read to its end
        self._leave()
        req, out = self._req, self._out
        elapsed = time.perf_counter() - self._started
        self._proxy.metrics.count_response(out.status, elapsed)
        if access_log.isEnabledFor(logging.INFO):  # the quiet proxy does not even look at these headers
            if self._head is not None:
                worker = header_value(*self._head, b"\r\nx-worker-id:")
                out.worker = None if worker is None else worker.decode("latin-1")
            emit_access(access_head(req, self._path, out.backend), out, elapsed)
        client.done(req)

    # -- ends from outside
    def client_gone(self) -> None:
        if self._ended:
            return
        out = self._out
        if out.result == "ok":
            out.result = "client_gone" if out.status == 0 else "aborted"
        out.status = out.status or 499
        self._cancel_task()
        self._end()

    def abandon(self) -> bool:
        """The backend stopped answering while this request ran there: 504, or a cut stream if the head went out."""
        backend = self._backend
        if self._ended or backend is None:
            return False
        self._cancel_task()
        backend.abandoned += 1
        self._proxy.count_error(backend, "unresponsive", TimeoutError(UNRESPONSIVE))
        self._out.result = "abandoned"
        if self.head_sent:
            self._client.cut()
        else:
            self._out.status = 504
            self._proxy.error(self._client, self._req, 504, ABANDONED)
        self._end()
        return True

    def check_read(self, now: float, timeout: float) -> None:
        """The read timeout is per gap between reads, so long SSE streams may run on."""
        conn = self.conn
        if conn is not None and now - conn.last_read >= timeout:
            conn.fail(TimeoutError(f"no bytes from the backend for {timeout:g} s"))

    def _cancel_task(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()

    # -- the response (mrtr_lb.lean.upstream.Exchange)
    def on_head(self, status: int, head: bytes, lower: bytes) -> None:
        """Pass the backend's head on; as it came when it has no hop-by-hop header (the usual case)."""
        req = self._req
        if lower.startswith(b"http/1.1 ") and _HOP_LINE.search(lower) is None:
            length = header_value(head, lower, b"\r\ncontent-length:")
            self._head = (head, lower)
            lines = [head]
        else:
            length, lines = self._rebuilt_head(status, head)
        if length is not None:
            self._hold = length not in (b"0", b"")
        head_only = req.method == "HEAD"
        if not (length is not None or head_only or status in _NO_BODY_STATUS or status < 200):
            if req.http11:
                self._chunked = True
                lines.append(b"Transfer-Encoding: chunked\r\n")
            else:
                req.keep_alive = False  # the body ends where the connection does
        if not req.keep_alive:
            lines.append(b"Connection: close\r\n")
        lines.append(b"\r\n")
        self._buffer.append(b"".join(lines))
        self._out.status = status
        if head_only:  # no body follows, whatever the length says; this connection is not reused
            self._hold = False
            self.flush()
            self._end()

    def _rebuilt_head(self, status: int, head: bytes) -> tuple[bytes | None, list[bytes]]:
        """The head line by line, without hop-by-hop headers (also those the backend's ``Connection`` names)."""
        first, headers = split_head(head)
        parts = first.split(b" ", 2)
        reason = parts[2] if len(parts) > 2 else b""
        tokens = connection_tokens(headers)
        drop = _HOP | tokens if tokens else _HOP
        lines = [b"HTTP/1.1 %d %s\r\n" % (status, reason)]
        length = None
        for name, value in headers:
            lower = name.lower()
            if lower in drop:
                continue
            if lower == b"content-length":
                length = value
            elif lower == b"x-worker-id":
                self._out.worker = value.decode("latin-1")
            lines.append(b"%s: %s\r\n" % (name, value))
        return length, lines

    def on_body(self, data: bytes) -> None:
        self._hold = False
        if self._chunked:
            self._buffer.append(b"%x\r\n%s\r\n" % (len(data), data))
        else:
            self._buffer.append(data)

    def on_complete(self) -> None:
        self._hold = False
        if self._chunked:
            self._buffer.append(b"0\r\n\r\n")
        self.clean = True
        self.flush()  # before the client's next (pipelined) request can answer
        self._end()

    def on_lost(self, exc: BaseException) -> None:
        self._hold = False
        self.flush()
        if self._ended:
            return
        backend = self._backend
        if backend is not None:
            self._proxy.count_error(backend, "upstream", exc)
        if self.head_sent:
            self._out.result = "upstream_broken"  # the only honest signal left is a cut connection
            self._client.cut()
        else:
            self._out.status, self._out.result = 502, "upstream_failed"
            self._proxy.error(self._client, self._req, 502, upstream_failed(exc))
        self._end()

    def flush(self) -> None:
        if self._buffer and not self._hold:
            data = b"".join(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
            self._buffer.clear()
            self._client.write(data)
            self.head_sent = True  # the head is always the first thing written
