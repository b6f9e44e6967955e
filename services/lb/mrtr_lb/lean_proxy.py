"""The lean engine's forwarding: one client request to one backend, bytes relayed as they come.

The contract is the aiohttp engine's (see :mod:`proxy`): retry on another
backend only when the connection could not be opened; once the request was
written, a failure is a 502 (or a cut stream once the head went out); a
backend the health checker abandons gives 504. What changes is the cost:
the request is written with one ``write`` to a pooled connection, and the
response head is parsed only to learn its framing, then passed on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from .admin import jsonrpc_error_body
from .backends import Backend, BackendPool
from .config import Settings
from .lean_http import ClientConnection, LeanRequest, simple_response
from .lean_upstream import Headers, UpstreamConnection, UpstreamPool
from .metrics import LbMetrics
from .proxy import BODY_METHODS, HOP_BY_HOP, REQUEST_DROP, Outcome, describe, log, record

_HOP = frozenset(name.encode() for name in HOP_BY_HOP)
_REQUEST_DROP = frozenset(name.encode() for name in REQUEST_DROP)
_NO_BODY_STATUS = frozenset({204, 304})
JSON = "application/json; charset=utf-8"


def _connection_tokens(headers: Headers) -> set[bytes]:
    """Header names the sender listed in ``Connection`` (hop-by-hop by declaration)."""
    tokens: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            tokens.update(token.strip().lower() for token in value.split(b","))
    return tokens


def upstream_request(req: LeanRequest, backend: Backend, remote: str) -> bytes:
    """The request as the backend gets it: end-to-end headers, X-Forwarded-*, a recomputed length."""
    path, query = req.path_and_query
    target = path + b"?" + query if query else path
    drop = _REQUEST_DROP | _connection_tokens(req.headers)
    lines = [b"%s %s HTTP/1.1\r\n" % (req.method.encode(), target)]
    forwarded_for = None
    seen_proto = seen_host = has_host = False
    for name, value in req.headers:
        lower = name.lower()
        if lower in drop:
            continue
        if lower == b"x-forwarded-for":
            forwarded_for = value if forwarded_for is None else forwarded_for + b", " + value
            continue
        seen_proto = seen_proto or lower == b"x-forwarded-proto"
        seen_host = seen_host or lower == b"x-forwarded-host"
        has_host = has_host or lower == b"host"
        lines.append(b"%s: %s\r\n" % (name, value))
    address = remote.encode()
    lines.append(b"X-Forwarded-For: %s\r\n" % (forwarded_for + b", " + address if forwarded_for else address))
    if not seen_proto:
        lines.append(b"X-Forwarded-Proto: http\r\n")
    host = req.header(b"host")
    if host and not seen_host:
        lines.append(b"X-Forwarded-Host: %s\r\n" % host)
    if not has_host:
        lines.append(b"Host: %s\r\n" % backend.url.split("://", 1)[1].encode())
    if req.body or req.method in BODY_METHODS:
        lines.append(b"Content-Length: %d\r\n" % len(req.body))
    lines.append(b"\r\n")
    lines.append(req.body)
    return b"".join(lines)


class UpstreamFailed(Exception):
    """The response could not be read to its end; carries the cause."""


class RelayExchange:
    """Relays one response from an upstream connection to a client connection.

    Output of one upstream read is gathered and written with one call (head
    and first body bytes together), so a small response costs one write.
    """

    def __init__(self, client: ClientConnection, req: LeanRequest, out: Outcome, read_timeout: float) -> None:
        self._client = client
        self._req = req
        self._out = out
        self._buffer: list[bytes] = []
        self._chunked = False
        self._read_timeout = read_timeout
        self._timer: asyncio.TimerHandle | None = None
        self._conn: UpstreamConnection | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.head_sent = False
        self._hold = False
        """The head waits for the first body bytes (a known non-empty length): one write instead of two."""
        self.clean = False
        """The backend's response was read to its end (the connection may be reused)."""

    def start(self, conn: UpstreamConnection, data: bytes) -> None:
        self._conn = conn
        self._client.upstream = conn
        if self._client.writing_paused:
            conn.pause(True)
        conn.send(self, data)
        self._arm(self._read_timeout)

    def _arm(self, delay: float) -> None:
        self._timer = asyncio.get_running_loop().call_later(delay, self._check_idle)

    def _check_idle(self) -> None:
        """The read timeout is per gap between reads, so long SSE streams may run on."""
        conn = self._conn
        if conn is None or self.done.done():
            return
        idle = time.monotonic() - conn.last_read
        if idle >= self._read_timeout:
            conn.fail(TimeoutError(f"no bytes from the backend for {self._read_timeout:g} s"))
        else:
            self._arm(self._read_timeout - idle)

    def finish(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._client.upstream is self._conn:
            self._client.upstream = None

    # -- Exchange
    def on_head(self, status: int, reason: bytes, headers: Headers) -> None:
        drop = _HOP | _connection_tokens(headers)
        lines = [b"HTTP/1.1 %d %s\r\n" % (status, reason)]
        has_length = False
        for name, value in headers:
            lower = name.lower()
            if lower in drop:
                continue
            if lower == b"content-length":
                has_length = True
                self._hold = value.strip() not in (b"0", b"")
            elif lower == b"x-worker-id":
                self._out.worker = value.decode("latin-1")
            lines.append(b"%s: %s\r\n" % (name, value))
        head_only = self._req.method == "HEAD"
        if not (has_length or head_only or status in _NO_BODY_STATUS or status < 200):
            if self._req.http11:
                self._chunked = True
                lines.append(b"Transfer-Encoding: chunked\r\n")
            else:
                self._req.keep_alive = False  # the body ends where the connection does
        if not self._req.keep_alive:
            lines.append(b"Connection: close\r\n")
        lines.append(b"\r\n")
        self._buffer.append(b"".join(lines))
        self._out.status = status
        if head_only:  # no body follows, whatever the length says; this connection is not reused
            self._hold = False
            self.flush()
            self._resolve(None)

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
        self._resolve(None)

    def on_lost(self, exc: BaseException) -> None:
        self._hold = False
        self.flush()
        self._resolve(exc)

    def flush(self) -> None:
        if self._buffer and not self._hold:
            data = b"".join(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
            self._buffer.clear()
            self._client.write(data)
            self.head_sent = True  # the head is always the first thing written

    def _resolve(self, exc: BaseException | None) -> None:
        if self.done.done():
            return
        if exc is None:
            self.done.set_result(None)
        else:
            self.done.set_exception(UpstreamFailed(describe(exc)))


class LeanProxy:
    """Picks backends round robin and runs attempts until one is delivered."""

    def __init__(self, pool: BackendPool, metrics: LbMetrics, settings: Settings) -> None:
        self._pool = pool
        self._metrics = metrics
        self._settings = settings
        self.upstream = UpstreamPool(connect_timeout=settings.connect_timeout, keepalive=settings.upstream_keepalive)
        self._limit = (
            asyncio.Semaphore(settings.max_upstream_connections) if settings.max_upstream_connections else None
        )

    async def handle(self, client: ClientConnection, req: LeanRequest) -> None:
        started = time.perf_counter()
        out = Outcome()
        try:
            await self._handle(client, req, out)
        except BaseException:
            if out.result == "ok":
                out.result = "client_gone" if out.status == 0 else "aborted"
            out.status = out.status or 499
            raise
        finally:
            record(self._metrics, req.method, req.path, req.text(b"mcp-method"), req.text(b"mcp-name"), out, started)

    async def _handle(self, client: ClientConnection, req: LeanRequest, out: Outcome) -> None:
        if req.reject is not None:
            status, message = req.reject
            out.status, out.result = status, "rejected"
            self._error(client, req, status, message, code=-32600)
            return
        tried: list[Backend] = []
        while True:
            backend = self._pool.pick(tried)
            if backend is None:
                out.status, out.result = 503, "no_backend"
                message = "no backend available"
                if tried:
                    message += f" ({len(tried)} could not be reached)"
                retry = str(self._settings.retry_after).encode()
                self._error(client, req, 503, message, extra=[(b"Retry-After", retry)])
                return
            if tried:
                self._metrics.backend_retries.labels(tried[-1].url).inc()
                tried[-1].retries += 1
            tried.append(backend)
            out.backend = backend.url
            out.attempts += 1
            if self._limit is None:
                delivered = await self._attempt(client, req, backend, out)
            else:
                async with self._limit:
                    delivered = await self._attempt(client, req, backend, out)
            if delivered:
                return

    def _error(
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

    async def _attempt(self, client: ClientConnection, req: LeanRequest, backend: Backend, out: Outcome) -> bool:
        """One attempt; False means "not delivered, try another backend"."""
        backend.in_flight += 1
        backend.requests += 1
        requests, in_flight = self._metrics.request_series(backend.url)
        requests.inc()
        in_flight.inc()
        conn: UpstreamConnection | None = None
        exchange: RelayExchange | None = None
        try:
            # A cancel scope the health checker expires if the backend stops answering (Backend.abandon_pending).
            async with asyncio.timeout(None) as scope:
                backend.pending.add(scope)
                try:
                    try:
                        conn = await self.upstream.acquire(backend.url)
                    except (OSError, TimeoutError) as exc:
                        self._count_error(backend, "connect", exc)
                        self._pool.set_health(backend, False, f"connect failed: {describe(exc)}")
                        return False
                    exchange = RelayExchange(client, req, out, self._settings.read_timeout)
                    exchange.start(conn, upstream_request(req, backend, client.remote))
                    try:
                        await exchange.done
                    except UpstreamFailed as exc:
                        self._count_error(backend, "upstream", exc)
                        if exchange.head_sent:
                            out.result = "upstream_broken"  # the only honest signal left is a cut connection
                            client.cut()
                        else:
                            out.status, out.result = 502, "upstream_failed"
                            self._error(client, req, 502, f"upstream failed: {exc}")
                    return True
                finally:
                    backend.pending.discard(scope)
        except TimeoutError:
            if not scope.expired():
                raise
            self._abandoned(client, req, backend, out, exchange)
            return True
        finally:
            if exchange is not None:
                exchange.finish()
            if conn is not None and not (exchange is not None and exchange.clean):
                conn.abort()  # never reuse a connection whose response was not read to its end
            backend.in_flight -= 1
            in_flight.dec()

    def _abandoned(
        self, client: ClientConnection, req: LeanRequest, backend: Backend, out: Outcome, exchange: RelayExchange | None
    ) -> None:
        """The backend stopped answering while this request ran there: 504, or a cut stream if the head went out."""
        backend.abandoned += 1
        self._count_error(backend, "unresponsive", TimeoutError("backend stopped answering health checks"))
        out.result = "abandoned"
        if exchange is not None and exchange.head_sent:
            client.cut()
            return
        out.status = 504
        self._error(client, req, 504, "backend stopped answering; retry with your last requestState")

    def _count_error(self, backend: Backend, kind: str, exc: BaseException) -> None:
        backend.errors += 1
        backend.last_error = describe(exc)
        self._metrics.backend_errors.labels(backend.url, kind).inc()
        log.warning("%s error on %s: %s", kind, backend.url, describe(exc))
