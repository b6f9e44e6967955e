"""The lean engine's forwarding: shared state of every :class:`~lean_forward.Forward` and the request bytes.

The request goes to the backend as one ``write`` on a pooled connection; the
response head is parsed only to learn its framing, then passed on. The read
timeout is checked by one periodic sweep over the requests in flight, not by
a timer per request.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Sequence

from mrtr_lb.admin import jsonrpc_error_body
from mrtr_lb.backends import Backend, BackendPool
from mrtr_lb.config import Settings
from mrtr_lb.lean_forward import Forward
from mrtr_lb.lean_http import ClientConnection, LeanRequest, simple_response
from mrtr_lb.lean_upstream import UpstreamPool, connection_tokens
from mrtr_lb.metrics import LbMetrics
from mrtr_lb.proxy import BODY_METHODS, REQUEST_DROP, describe, log

_REQUEST_DROP = frozenset(name.encode() for name in REQUEST_DROP)
JSON = "application/json; charset=utf-8"


_XFF, _XFP, _XFH, _HOST = b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host", b"host"
_REQUEST_SPECIAL = _REQUEST_DROP | {_XFF}


HEAD_CACHE_SIZE = 16
"""Header blocks kept per client connection (a few tools and methods; requests that vary every time miss)."""
HEAD_CACHE_BLOCK = 4096
"""Larger header blocks are built for their request only: what a connection keeps stays small (16 x 4 KiB)."""


class HeaderBlock:
    """The upstream header lines built for one (backend, request headers) and what else they determine.

    Kept on the client connection: the access-log line's start (method, path, MCP fields, backend) is
    made from it once and reused while the method and path repeat, so a line costs no header lookup.
    """

    __slots__ = ("backend", "block", "log_head", "log_method", "log_path")

    def __init__(self, backend: str, block: bytes) -> None:
        self.backend = backend
        self.block = block
        self.log_head = ""
        self.log_method: str | None = None
        self.log_path: str | None = None


def upstream_request(req: LeanRequest, backend: Backend, client: ClientConnection) -> bytes:
    """The request as the backend gets it: end-to-end headers, X-Forwarded-*, a recomputed length.

    A client sends the same headers on most requests of a connection (its length is not among them),
    so the header block built for one is kept on the connection and reused for the next.
    """
    key = (backend.url, tuple(req.headers))
    blocks = client.upstream_heads
    entry = blocks.get(key)
    if entry is None:
        entry = HeaderBlock(backend.url, header_block(req, backend, client.remote))
        if len(blocks) < HEAD_CACHE_SIZE and len(entry.block) <= HEAD_CACHE_BLOCK:
            blocks[key] = entry
    req.sent_with = entry
    path, query = req.path_and_query
    body = req.body
    length = b"Content-Length: %d\r\n\r\n" % len(body) if body or req.method in BODY_METHODS else b"\r\n"
    target = path + b"?" + query if query else path
    return b"".join((req.method.encode(), b" ", target, b" HTTP/1.1\r\n", entry.block, length, body))


def header_block(req: LeanRequest, backend: Backend, remote: str) -> bytes:
    """The upstream header lines, without the request line and the length: end-to-end headers, X-Forwarded-*."""
    lowered = req.lowered()
    tokens = connection_tokens(req.headers) if b"connection" in lowered else None
    special = _REQUEST_SPECIAL | tokens if tokens else _REQUEST_SPECIAL
    parts: list[bytes] = []
    append = parts.append
    forwarded_for: list[bytes] = []
    for name, value in req.headers:
        lower = name.lower()
        if lower in special:
            if lower == _XFF and not (tokens and _XFF in tokens):
                forwarded_for.append(value)
            continue
        append(b"%s: %s\r\n" % (name, value))
    forwarded_for.append(remote.encode())
    append(b"X-Forwarded-For: %s\r\n" % b", ".join(forwarded_for))
    if _XFP not in lowered or (tokens and _XFP in tokens):
        append(b"X-Forwarded-Proto: http\r\n")
    host = lowered.get(_HOST)
    if host and (_XFH not in lowered or (tokens and _XFH in tokens)):
        append(b"X-Forwarded-Host: %s\r\n" % host)
    if host is None or (tokens and _HOST in tokens):
        append(b"Host: %s\r\n" % backend.url.split("://", 1)[1].encode())
    return b"".join(parts)


class Slots:
    """A cap on upstream connections that can be taken without awaiting when one is free."""

    def __init__(self, size: int) -> None:
        self._free = size
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def try_take(self) -> bool:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return True
        return False

    async def take(self) -> None:
        if self.try_take():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot just as it was cancelled: pass it on
            raise

    def release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


class LeanProxy:
    """What every forwarded request shares: the pool, metrics, upstream connections, the read-timeout sweep."""

    def __init__(self, pool: BackendPool, metrics: LbMetrics, settings: Settings) -> None:
        self.pool = pool
        self.metrics = metrics
        self.settings = settings
        self.upstream = UpstreamPool(connect_timeout=settings.connect_timeout, keepalive=settings.upstream_keepalive)
        self.limit = Slots(settings.max_upstream_connections) if settings.max_upstream_connections else None
        self.active: set[Forward] = set()
        """Requests whose bytes went to a backend and whose response is not complete yet."""
        self.request_bytes = upstream_request
        self._sweep: asyncio.TimerHandle | None = None
        self._sweep_every = min(1.0, settings.read_timeout / 4)

    def handle(self, client: ClientConnection, req: LeanRequest, path: str) -> None:
        Forward(self, client, req, path).run()

    def start(self) -> None:
        """Begin the read-timeout sweep (a read timeout is noticed up to a quarter of it, at most 1 s, late)."""
        self._sweep = asyncio.get_running_loop().call_later(self._sweep_every, self._check_reads)

    def _check_reads(self) -> None:
        now, timeout = time.monotonic(), self.settings.read_timeout
        for forward in list(self.active):
            forward.check_read(now, timeout)
        self._sweep = asyncio.get_running_loop().call_later(self._sweep_every, self._check_reads)

    def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        self.upstream.close()

    def error(
        self,
        client: ClientConnection,
        req: LeanRequest,
        status: int,
        message: str,
        *,
        code: int = -32603,
        extra: Sequence[tuple[bytes, bytes]] = (),
    ) -> None:
        body = jsonrpc_error_body(message, code)
        client.write(
            simple_response(status, body, JSON, keep_alive=req.keep_alive, head=req.method == "HEAD", extra=extra)
        )

    def count_error(self, backend: Backend, kind: str, exc: BaseException) -> None:
        backend.errors += 1
        backend.last_error = describe(exc)
        self.metrics.backend_errors.labels(backend.url, kind).inc()
        log.warning("%s error on %s: %s", kind, backend.url, describe(exc))
