"""The lean engine's side towards the clients: one asyncio Protocol per connection.

httptools parses each request; the body is read whole (bounded by the size
limit, so a request can be re-sent after a connect failure) and requests are
answered one after another in arrival order, as HTTP/1.1 keep-alive and
pipelining require. The forwarding itself is :mod:`mrtr_lb.lean.forward`'s.
The admin listener (:mod:`mrtr_lb.admin_server`) serves its API over this
connection class too.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from typing import Protocol, cast
from urllib.parse import unquote

import httptools

from mrtr_lb.bounds import LINGER, Limits, head_bytes_in
from mrtr_lb.lean.blocks import HeaderBlock
from mrtr_lb.lean.upstream import Headers, UpstreamConnection

log = logging.getLogger("mrtr_lb.lean")


class LeanRequest:
    """One parsed client request (header names and values as the client sent them, but ``Content-Length``)."""

    __slots__ = (
        "_lower",
        "_split",
        "body",
        "headers",
        "http11",
        "keep_alive",
        "method",
        "reject",
        "sent_with",
        "target",
    )

    def __init__(
        self, method: str, target: bytes, headers: Headers, keep_alive: bool, http11: bool, body: bytes = b""
    ) -> None:
        self.method = method
        self.target = target
        self.headers = headers
        self.keep_alive = keep_alive
        self.http11 = http11
        self.body = body
        self.reject: tuple[int, str] | None = None
        """Answer this status and message instead (size limit, bad framing); the connection closes after."""
        self._lower: dict[bytes, bytes] | None = None
        self._split: tuple[bytes, bytes] | None = None
        self.sent_with: HeaderBlock | None = None
        """The header block this request went upstream with (set by :func:`mrtr_lb.lean.request.upstream_request`)."""

    def lowered(self) -> dict[bytes, bytes]:
        """Headers by lower-case name (the last one wins), built once."""
        if self._lower is None:
            self._lower = {n.lower(): v for n, v in self.headers}
        return self._lower

    def header(self, name: bytes) -> bytes | None:
        """Look up a header by its lower-case name (the last one wins)."""
        return self.lowered().get(name)

    def text(self, name: bytes) -> str | None:
        value = self.lowered().get(name)
        return None if value is None else value.decode("latin-1")

    @property
    def path_and_query(self) -> tuple[bytes, bytes]:
        """Origin-form path and query, also for an absolute-form target (its host never picks the backend)."""
        if self._split is None:
            self._split = _split_target(self.target)
        return self._split

    @property
    def path(self) -> str:
        return _path_text(self.path_and_query[0])


def _split_target(target: bytes) -> tuple[bytes, bytes]:
    if target[:1] == b"/" and b"#" not in target:  # origin form, the usual case: no URL parser needed
        path, _, query = target.partition(b"?")
        return path, query
    try:
        url = httptools.parse_url(target)
    except httptools.HttpParserInvalidURLError:
        return b"/", b""
    return url.path or b"/", url.query or b""


_PATHS: dict[bytes, str] = {}
"""Decoded paths by raw path: the proxied paths come back on every request."""


def _path_text(raw: bytes) -> str:
    text = _PATHS.get(raw)
    if text is None:
        text = raw.decode("latin-1")
        text = unquote(text) if "%" in text else text
        if len(_PATHS) < 1024 and len(raw) <= 256:  # bounded in number and size: paths are client-controlled
            _PATHS[raw] = text
    return text


_METHODS = {m.encode(): m for m in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")}
"""Method names decoded once."""


class Handler(Protocol):
    """What runs a connection's current request; told when the client leaves mid-request."""

    def client_gone(self) -> None: ...


Dispatch = Callable[["ClientConnection", LeanRequest], None]
"""Starts answering a request; whatever it starts calls :meth:`ClientConnection.done` exactly once."""


class _Stop(Exception):
    """Raised from a parser callback to stop parsing this connection at once (it was refused)."""


class ClientConnection(asyncio.Protocol):
    """Parses requests off one client connection and answers them in order, within :class:`Limits`.

    No task per request: the dispatcher starts an answer and the answer calls
    :meth:`done`, from a protocol callback when the response is relayed, which
    starts the next queued (pipelined) request. A head is measured as its bytes
    arrive (431 past the cap, before it is buffered); one timer per connection
    watches the head and body deadlines (408) and the idle keep-alive.
    """

    def __init__(self, dispatch: Dispatch, limits: Limits, registry: set[ClientConnection]) -> None:
        self._dispatch = dispatch
        self._limits = limits
        self._max_body = limits.max_body
        self._max_head = limits.max_head
        self._max_headers = limits.max_headers
        self._registry = registry
        self._parser = httptools.HttpRequestParser(self)
        self._queue: collections.deque[LeanRequest] = collections.deque()
        self._active: LeanRequest | None = None
        self._pumping = False
        self._waiters: list[asyncio.Future[None]] = []
        self._current: LeanRequest | None = None
        self._url = b""
        self._headers: Headers = []
        self._length: bytes | None = None
        self._expect: bytes | None = None
        self._body: list[bytes] = []
        self._size = 0
        self._in_head = True
        """Between requests or inside a head (not in a body): arriving bytes count towards the head cap."""
        self._head_bytes = 0
        self._hosts = 0
        self._uncounted = False
        """The head being parsed began inside a read that did not start with it (pipelined): its bytes were not
        all counted, so its parsed size is checked when it is complete."""
        self._tail = b""
        """The last bytes of a read that ended inside a head: a blank line split across two reads is found."""
        self._head_since: float | None = None
        """When the head being read began (for a new connection: its accept), while it is not complete: only then
        is it set, so it also says that a head is awaited."""
        self._body_since: float | None = None
        """When the body being read began, while it is not complete."""
        self._paused_since: float | None = None
        """Since when the client's receive window has been full (writing paused)."""
        self._stopped = False  # parse nothing more: the connection closes after what is queued
        self._lingering = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_done = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self.transport: asyncio.Transport | None = None
        self.remote = ""
        self.handler: Handler | None = None
        """What runs the current request (set by the dispatcher), told if the client leaves."""
        self.upstream: UpstreamConnection | None = None
        """The backend connection whose response is streaming here (flow control follows it)."""
        self.upstream_heads: dict[tuple[str, tuple[tuple[bytes, bytes], ...]], HeaderBlock] = {}
        """Upstream header blocks by (backend, the request's headers): see ``lean.request.upstream_request``."""
        self.writing_paused = False
        self.gone = False

    @property
    def busy(self) -> bool:
        """A request is being answered or waits its turn."""
        return self._active is not None or bool(self._queue)

    async def finished(self) -> None:
        """Return once no request is being answered or waiting (for a graceful stop)."""
        if self.busy and not self.gone:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's
        peer = self.transport.get_extra_info("peername")
        self.remote = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        self._registry.add(self)
        self._loop = loop = asyncio.get_running_loop()
        self._last_done = self._head_since = now = loop.time()  # the first head's deadline runs from the accept
        self._arm(now + self._limits.head_timeout)

    def data_received(self, data: bytes) -> None:
        if self._stopped:
            return  # refused (or lingering): the rest is dropped unread
        if self._in_head:  # the head's bytes as they arrive, before the parser buffers them (inlined: every request)
            tail = self._tail
            if tail:
                self._tail = b""
                used = head_bytes_in(data, tail)
            else:
                at = data.find(b"\r\n\r\n")
                used = len(data) if at < 0 else at + 4
            if self._current is None:
                self._uncounted = False
            self._head_bytes += used
            if self._head_bytes > self._max_head:
                self._refuse(431, self._limits.head_too_large())
                return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse(400, "protocol upgrades are not supported")
        except httptools.HttpParserError as exc:
            if isinstance(exc, httptools.HttpParserCallbackError) and isinstance(exc.__context__, _Stop):
                pass  # refused from a callback
            else:
                self._refuse(400, f"malformed request: {exc}")
        if self._current is not None and not self._stopped:
            self._unfinished(data)

    def _unfinished(self, data: bytes) -> None:
        """A read ended inside a request: note when its head (or body) began and make sure the timer sees it."""
        assert self._loop is not None
        limits = self._limits
        if self._in_head:
            self._tail = data[-3:]
            if self._head_since is None:
                self._head_since = now = self._loop.time()
                self._arm(now + limits.head_timeout)
        elif self._body_since is None:
            self._body_since = now = self._loop.time()
            self._arm(limits.body_deadline(now, self._size))

    def connection_lost(self, exc: Exception | None) -> None:
        """Also on the client's EOF (asyncio's default): a FIN cannot be told from a client gone,
        and an SSE stream whose client left must free its backend."""
        self.gone = True
        self._registry.discard(self)
        self._queue.clear()
        if self._timer is not None:
            self._timer.cancel()
        handler = self.handler
        if handler is not None:
            handler.client_gone()
        self._wake()

    # -- the one timer: head and body deadlines, idle keep-alive
    def _arm(self, at: float) -> None:
        """Make the timer fire at ``at`` at the latest."""
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        assert self._loop is not None
        self._timer_at = at
        self._timer = self._loop.call_at(at, self._check)

    def _check(self) -> None:
        """What is due: a late head or body (408), an idle connection (close); else wait for the next deadline."""
        self._timer = None
        if self.gone or self._lingering:
            return
        assert self._loop is not None
        now, limits = self._loop.time(), self._limits
        paused = self._paused_since
        if paused is not None and now >= paused + limits.send_timeout:
            log.info("client %s read nothing for %g s: connection cut", self.remote, limits.send_timeout)
            self._stopped = True
            if self.transport is not None:
                self.transport.abort()  # a close would wait for the client to read what is buffered
            return
        if self._stopped:
            at = now + limits.keepalive_timeout  # refused: its answer is queued behind the running one
        elif self._body_since is not None and not self._in_head:
            at = limits.body_deadline(self._body_since, self._size)
            if now >= at:
                self._refuse(408, limits.body_too_slow())
                return
        elif self._head_since is not None:
            at = self._head_since + limits.head_timeout
            if now >= at:
                if self._current is None and not self.busy:
                    self.close()  # not a byte of a request: close without a word (HAProxy, nginx)
                else:
                    self._refuse(408, limits.head_too_slow())
                return
        elif not self.busy:
            at = self._last_done + limits.keepalive_timeout
            if now >= at:
                self.close()
                return
        else:
            at = now + limits.keepalive_timeout  # answering: the read timeout bounds that
        self._arm(at if paused is None else min(at, paused + limits.send_timeout))

    def pause_writing(self) -> None:
        """The client reads slower than the backend writes: stop reading the backend; cut after SEND_TIMEOUT."""
        self.writing_paused = True
        if self.upstream is not None:
            self.upstream.pause(True)
        if self._loop is not None:
            self._paused_since = now = self._loop.time()
            self._arm(now + self._limits.send_timeout)

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._paused_since = None
        if self.upstream is not None:
            self.upstream.pause(False)

    # -- httptools callbacks
    def on_message_begin(self) -> None:
        self._url, self._body, self._size = b"", [], 0
        self._length = self._expect = None
        self._headers = []
        self._hosts = 0
        self._current = LeanRequest(method="", target=b"", headers=self._headers, keep_alive=True, http11=True)

    def on_url(self, url: bytes) -> None:
        self._url += url
        if len(self._url) > self._max_head:  # only a pipelined target passes the byte count: its own cap
            self._stop(431, self._limits.head_too_large())

    def on_header(self, name: bytes, value: bytes) -> None:
        """``Content-Length`` is kept apart (the body's framing is recomputed on the way out), so that the
        header list of a client's requests repeats from one request to the next (see ``upstream_request``)."""
        size = len(name)
        if size == 14 or size == 6:
            lower = name.lower()
            if lower == b"content-length":
                self._length = value
                return
            if lower == b"expect":
                self._expect = value
        elif size == 4 and name.lower() == b"host":
            self._hosts += 1
        headers = self._headers
        headers.append((name, value))
        if len(headers) > self._max_headers:  # a flood of small headers within the byte cap
            self._stop(431, self._limits.too_many_headers())

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self._head_since = None
        req = self._current
        if req is None:
            return
        headers = self._headers
        if len(headers) + (self._length is not None) > self._max_headers:
            self._stop(431, self._limits.too_many_headers())
        if self._uncounted and len(self._url) + sum(len(n) + len(v) + 4 for n, v in headers) > self._max_head:
            self._stop(431, self._limits.head_too_large())
        parser = self._parser
        raw_method = parser.get_method()
        method = _METHODS.get(raw_method)
        req.method = method if method is not None else raw_method.decode("ascii", "replace")
        req.target = self._url
        req.http11 = parser.get_http_version() == "1.1"
        if parser.should_upgrade():  # refused here, before it is dispatched: one answer, then the connection closes
            if raw_method == b"CONNECT":
                self._stop(501, "CONNECT is not supported")
            else:
                self._stop(400, "protocol upgrades are not supported")
        url = self._url
        if url[:1] != b"/" and not url[:8].lower().startswith((b"http://", b"https://")):
            self._stop(400, "malformed request: the target is neither a path nor an absolute URL")
        if self._hosts != 1 and (self._hosts or req.http11):  # RFC 9112 3.2: exactly one (HTTP/1.0 may omit it)
            self._stop(400, "a request needs exactly one Host header" if self._hosts else "no Host header")
        length = self._length
        if length is not None and length.strip().isdigit() and int(length) > self._max_body:
            self._stop(413, f"request body larger than {self._max_body} bytes")
        expect = self._expect
        if expect is not None and expect.lower() == b"100-continue" and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self._max_body:
            self._stop(413, f"request body larger than {self._max_body} bytes")
        self._body.append(body)

    def on_message_complete(self) -> None:
        req, self._current = self._current, None
        self._in_head = self._uncounted = True  # a head that begins later in this read is not counted by bytes
        self._body_since = None
        if req is None or self._stopped:
            return
        body = self._body
        req.body = body[0] if len(body) == 1 else b"".join(body)
        req.keep_alive = self._parser.should_keep_alive()
        self._body = []
        self._enqueue(req)

    # -- answering
    def _stop(self, status: int, message: str) -> None:
        """Refuse from inside a parser callback and stop the parser at once (nothing after it is parsed)."""
        self._refuse(status, message)
        raise _Stop

    def _refuse(self, status: int, message: str) -> None:
        """Answer this request with an error and read nothing more: its unread rest is not a request."""
        if self._stopped:
            return
        self._stopped = True
        req = self._current or LeanRequest(method="", target=b"/", headers=[], keep_alive=False, http11=True)
        self._current = None
        if not req.target:
            req.target = self._url or b"/"
        req.reject, req.keep_alive = (status, message), False
        self._enqueue(req)

    def _enqueue(self, req: LeanRequest) -> None:
        self._queue.append(req)
        self._pump()

    def _pump(self) -> None:
        """Start queued requests one at a time; a loop, not recursion, when answers end at once."""
        if self._pumping:
            return
        self._pumping = True
        try:
            while self._active is None and self._queue and not self.gone:
                req = self._active = self._queue.popleft()
                try:
                    self._dispatch(self, req)
                except Exception:
                    log.exception("unhandled error on a client connection")
                    self._queue.clear()
                    self._active = self.handler = None
                    self.close()
        finally:
            self._pumping = False

    def done(self, req: LeanRequest) -> None:
        """The answer to ``req`` is complete (or abandoned): close, or go on with the next request."""
        if req is not self._active:
            return
        self._active = self.handler = None
        if self._loop is not None:
            self._last_done = now = self._loop.time()
            if self._timer_at > now + self._limits.keepalive_timeout:  # rarely the nearest deadline
                self._arm(now + self._limits.keepalive_timeout)
        if req.reject is not None:
            self._queue.clear()
            self.linger()
        elif not req.keep_alive:
            self._queue.clear()
            self.close()
        else:
            self._pump()
        if not self.busy:
            self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def close(self) -> None:
        """Close after what was written (a cut when the response promised more)."""
        self._stopped = True
        if self.transport is not None:
            self.transport.close()

    def linger(self) -> None:
        """Close a refused connection gently: send the answer and a FIN, drop what still comes for a moment,
        then close. Closing at once with unread bytes would reset the connection and could lose the answer."""
        self._stopped = self._lingering = True
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if transport.can_write_eof():
            transport.write_eof()
        assert self._loop is not None
        self._loop.call_later(LINGER, transport.abort)

    def cut(self) -> None:
        """End the connection mid-response, after what was written: the client sees the truncation."""
        self.close()
