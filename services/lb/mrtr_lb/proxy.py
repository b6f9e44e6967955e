"""Forwarding one client request to one backend and streaming the answer back.

The one rule that shapes this module: a request is retried on another backend
only when it provably never left the proxy (the connection could not be
opened). Once bytes may have reached a worker, the worker may have acted on
them, so the client gets a 502 and retries with its own last requestState.
The same holds when the backend stops answering altogether (the health
checker abandons its requests): the client gets a 504 and retries.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from mrtr_lb.backends import Backend, BackendPool
from mrtr_lb.config import Settings
from mrtr_lb.metrics import LbMetrics

access_log = logging.getLogger("mrtr_lb.access")
log = logging.getLogger("mrtr_lb.proxy")

# Failures raised before a single request byte was written: safe to retry elsewhere.
UNDELIVERED: tuple[type[Exception], ...] = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
# Everything else that can go wrong talking to a backend.
UPSTREAM_FAILURES: tuple[type[Exception], ...] = (aiohttp.ClientError, TimeoutError, OSError)

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# The body is re-sent from memory, so its framing headers are recomputed.
REQUEST_DROP = HOP_BY_HOP | {"content-length", "expect"}
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def send_once() -> aiohttp.ClientMiddlewareType:
    """A client middleware for one request that lets it reach the backend at most once.

    When an idempotent request (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) fails with
    ``ServerDisconnectedError`` or ``ClientOSError`` (other than a connect error), aiohttp
    sends it once more on a fresh connection (RFC 9112 section 9.3.1) by running the
    middleware chain again. The backend may already have acted on the first copy, so
    this middleware answers the second run with the first failure, sending nothing.
    Connect failures are never retried by aiohttp; the proxy retries those itself.
    """
    failure: BaseException | None = None

    async def middleware(req: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType) -> aiohttp.ClientResponse:
        nonlocal failure
        if failure is not None:
            raise failure
        try:
            return await handler(req)
        except BaseException as exc:
            failure = exc
            raise

    return middleware


def forwardable(headers: CIMultiDictProxy[str] | CIMultiDict[str], drop: frozenset[str]) -> CIMultiDict[str]:
    """Copy end-to-end headers, dropping hop-by-hop ones and those named in ``Connection``."""
    dropped = set(drop)
    for value in headers.getall("Connection", []):
        dropped.update(token.strip().lower() for token in value.split(","))
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        if name.lower() not in dropped:
            out.add(name, value)
    return out


def jsonrpc_error(
    status: int, message: str, *, code: int = -32603, headers: dict[str, str] | None = None
) -> web.Response:
    """A small JSON-RPC error body: MCP clients parse it instead of choking on HTML."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return web.json_response(body, status=status, headers=headers)


def describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}"[:200] if text else type(exc).__name__


class ScopeAbandon:
    """An aiohttp-engine request as :class:`Backend` holds it: abandoning expires its cancel scope now."""

    __slots__ = ("scope",)

    def __init__(self, scope: asyncio.Timeout) -> None:
        self.scope = scope

    def abandon(self) -> bool:
        if self.scope.expired():
            return False
        self.scope.reschedule(asyncio.get_running_loop().time())
        return True


@dataclass
class Outcome:
    """What happened to one request, for the access log and metrics."""

    backend: str = "-"
    status: int = 0
    attempts: int = 0
    result: str = "ok"
    worker: str | None = None
    response: web.StreamResponse | None = None
    """The client response once its headers went out (nothing else can be sent then)."""


class Proxy:
    """The catch-all handler; uses the shared pool and the upstream session.

    Routes must exist before the application starts, the client session only
    after (it belongs to the running loop), hence :meth:`attach`.
    """

    def __init__(self, pool: BackendPool, metrics: LbMetrics, settings: Settings) -> None:
        self._pool = pool
        self._metrics = metrics
        self._settings = settings
        self._session: aiohttp.ClientSession | None = None

    def attach(self, session: aiohttp.ClientSession | None) -> None:
        self._session = session

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self._session is None:
            return jsonrpc_error(503, "load balancer is not running", headers={"Retry-After": "1"})
        started = time.perf_counter()
        out = Outcome()
        try:
            return await self._handle(request, out)
        except BaseException:
            # Cancellation (client went away) or a bug: log it, let aiohttp close the connection.
            if out.result == "ok":
                out.result = "client_gone" if out.status == 0 else "aborted"
            out.status = out.status or 499
            raise
        finally:
            self._finish(request, out, started)

    async def _handle(self, request: web.Request, out: Outcome) -> web.StreamResponse:
        body = await self._read_body(request, out)
        if isinstance(body, web.StreamResponse):
            return body
        headers = self._upstream_headers(request)
        data = body if body or request.method in BODY_METHODS else None
        tried: list[Backend] = []
        while True:
            backend = self._pool.pick(tried)
            if backend is None:
                return self._unavailable(out, tried)
            if tried:
                self._metrics.backend_retries.labels(tried[-1].url).inc()
                tried[-1].retries += 1
            tried.append(backend)
            out.backend = backend.url
            out.attempts += 1
            response = await self._forward(request, backend, headers, data, out)
            if response is not None:
                return response

    async def _read_body(self, request: web.Request, out: Outcome) -> bytes | web.StreamResponse:
        """Read the whole body (kept in memory so it can be re-sent), bounded in size."""
        limit = self._settings.max_body_size
        too_large = f"request body larger than {limit} bytes"
        if request.content_length is not None and request.content_length > limit:
            return self._reject(out, 413, too_large)
        chunks: list[bytes] = []
        size = 0
        try:
            while chunk := await request.content.readany():
                size += len(chunk)
                if size > limit:
                    return self._reject(out, 413, too_large)
                chunks.append(chunk)
        except (ConnectionError, aiohttp.ClientPayloadError) as exc:
            return self._reject(out, 400, f"could not read request body: {describe(exc)}")
        return b"".join(chunks)

    def _reject(self, out: Outcome, status: int, message: str) -> web.Response:
        out.status, out.result = status, "rejected"
        response = jsonrpc_error(status, message, code=-32600)
        response.force_close()  # the unread rest of the body must not be parsed as a request
        return response

    def _unavailable(self, out: Outcome, tried: list[Backend]) -> web.Response:
        out.status, out.result = 503, "no_backend"
        message = "no backend available"
        if tried:
            message += f" ({len(tried)} could not be reached)"
        return jsonrpc_error(503, message, headers={"Retry-After": str(self._settings.retry_after)})

    def _upstream_headers(self, request: web.Request) -> CIMultiDict[str]:
        """Client headers minus hop-by-hop ones, plus the usual X-Forwarded-* trio.

        ``Host`` is kept as the client sent it, like HAProxy and Envoy do.
        """
        headers = forwardable(request.headers, REQUEST_DROP)
        remote = request.remote or ""
        prior = headers.get("X-Forwarded-For")
        headers["X-Forwarded-For"] = f"{prior}, {remote}" if prior else remote
        headers.setdefault("X-Forwarded-Proto", request.scheme)
        if request.host:
            headers.setdefault("X-Forwarded-Host", request.host)
        return headers

    async def _forward(
        self,
        request: web.Request,
        backend: Backend,
        headers: CIMultiDict[str],
        data: bytes | None,
        out: Outcome,
    ) -> web.StreamResponse | None:
        """One attempt; ``None`` means "not delivered, try another backend"."""
        backend.in_flight += 1
        backend.requests += 1
        self._metrics.count_request(backend.url)
        try:
            # A cancel scope the health checker expires if the backend stops answering (Backend.abandon_pending).
            async with asyncio.timeout(None) as scope:
                pending = ScopeAbandon(scope)
                backend.pending.add(pending)
                try:
                    return await self._attempt(request, backend, headers, data, out)
                finally:
                    backend.pending.discard(pending)
        except TimeoutError:
            if not scope.expired():
                raise
            return self._abandoned(request, backend, out)
        finally:
            backend.in_flight -= 1

    async def _attempt(
        self,
        request: web.Request,
        backend: Backend,
        headers: CIMultiDict[str],
        data: bytes | None,
        out: Outcome,
    ) -> web.StreamResponse | None:
        assert self._session is not None
        # rel_url, not raw_path: an absolute-form request line must not pick the upstream host.
        url = URL(backend.url + request.rel_url.raw_path_qs, encoded=True)
        try:
            upstream = await self._session.request(
                request.method, url, headers=headers, data=data, allow_redirects=False, middlewares=(send_once(),)
            )
        except UNDELIVERED as exc:
            self._count_error(backend, "connect", exc)
            self._pool.set_health(backend, False, f"connect failed: {describe(exc)}")
            return None
        except UPSTREAM_FAILURES as exc:
            self._count_error(backend, "upstream", exc)
            out.status, out.result = 502, "upstream_failed"
            return jsonrpc_error(502, f"upstream failed: {describe(exc)}")
        return await self._stream(request, backend, upstream, out)

    def _abandoned(self, request: web.Request, backend: Backend, out: Outcome) -> web.StreamResponse:
        """The backend stopped answering while this request ran there: 504, or a cut stream if headers went out."""
        backend.abandoned += 1
        self._count_error(backend, "unresponsive", TimeoutError("backend stopped answering health checks"))
        out.result = "abandoned"
        if out.response is not None:
            if request.transport is not None:
                request.transport.close()
            return out.response
        out.status = 504
        return jsonrpc_error(504, "backend stopped answering; retry with your last requestState")

    async def _stream(
        self,
        request: web.Request,
        backend: Backend,
        upstream: aiohttp.ClientResponse,
        out: Outcome,
    ) -> web.StreamResponse:
        """Relay status, headers and body chunk by chunk, as soon as each arrives."""
        out.status = upstream.status
        out.worker = upstream.headers.get("X-Worker-Id")
        response = web.StreamResponse(
            status=upstream.status,
            reason=upstream.reason,
            headers=forwardable(upstream.headers, HOP_BY_HOP),
        )
        complete = False
        try:
            await response.prepare(request)
            out.response = response
            while True:
                try:
                    chunk = await upstream.content.readany()
                except UPSTREAM_FAILURES as exc:
                    # Headers are already out; the only honest signal left is a cut connection.
                    self._count_error(backend, "upstream", exc)
                    out.result = "upstream_broken"
                    if request.transport is not None:
                        request.transport.close()
                    return response
                if not chunk:
                    break
                await response.write(chunk)
            await response.write_eof()
            complete = True
        except ConnectionError:
            out.result = "client_gone"
        finally:
            if complete:
                upstream.release()
            else:
                upstream.close()  # never return a half-read connection to the pool
        return response

    def _count_error(self, backend: Backend, kind: str, exc: BaseException) -> None:
        backend.errors += 1
        backend.last_error = describe(exc)
        self._metrics.backend_errors.labels(backend.url, kind).inc()
        log.warning("%s error on %s: %s", kind, backend.url, describe(exc))

    def _finish(self, request: web.Request, out: Outcome, started: float) -> None:
        h = request.headers
        record(self._metrics, request.method, request.path, h.get("Mcp-Method"), h.get("Mcp-Name"), out, started)


def record(
    metrics: LbMetrics,
    method: str,
    path: str,
    mcp_method: str | None,
    mcp_name: str | None,
    out: Outcome,
    started: float,
) -> None:
    """Metrics and the one access-log line of a finished request (both engines)."""
    elapsed = time.perf_counter() - started
    metrics.count_response(out.status, elapsed)
    if access_log.isEnabledFor(logging.INFO):
        log_access(method, path, mcp_method, mcp_name, out, elapsed)


def log_access(
    method: str, path: str, mcp_method: str | None, mcp_name: str | None, out: Outcome, elapsed: float
) -> None:
    """The access-log line of a finished request (call only when ``access_log`` is enabled for INFO)."""
    emit_access(access_head(method, path, mcp_method, mcp_name, out.backend), out, elapsed)


def access_head(method: str, path: str, mcp_method: str | None, mcp_name: str | None, backend: str) -> str:
    """An access-log line up to ``status=``: the part a client's requests repeat (the lean engine keeps it)."""
    mcp = f"mcp_method={_field(mcp_method)} mcp_name={_field(mcp_name)}"
    return f"{method} {_field(path)} {mcp} backend={backend} status="


def emit_access(head: str, out: Outcome, elapsed: float) -> None:
    """Finish the line that :func:`access_head` began with what varies per request, and log it.

    One f-string: ``%`` formatting of an argument tuple cost as much again.
    """
    message = (
        f"{head}{out.status} duration_ms={elapsed * 1000:.1f} retried={'yes' if out.attempts > 1 else 'no'} "
        f"attempts={out.attempts} result={out.result} worker={_field(out.worker)}"
    )
    if _direct is not None:
        _direct(message)
        return
    # makeRecord + handle: the same record as .info() makes, without walking the stack for the caller.
    access_log.handle(access_log.makeRecord(access_log.name, logging.INFO, __file__, 0, message, (), None))


_direct: Callable[[str], None] | None = None


def direct_access_lines(writer: Callable[[str], None] | None) -> None:
    """Write access-log lines with ``writer`` instead of through logging (the lean CLI's batched stderr)."""
    global _direct
    _direct = writer


_NEEDS_QUOTES = re.compile(r'[\s"\\=]')


_FIELDS: dict[str, str] = {}
"""Rendered fields by value: the same few paths, tool names and worker ids come back on every line."""


def _field(value: str | None) -> str:
    """Render a client-controlled value so it cannot break the one-line format."""
    if not value:
        return "-"
    rendered = _FIELDS.get(value)
    if rendered is None:
        rendered = _render_field(value)
        if len(value) <= 200:  # bounded in size and number: values are client-controlled
            if len(_FIELDS) >= 4096:
                _FIELDS.clear()
            _FIELDS[value] = rendered
    return rendered


def _render_field(value: str) -> str:
    value = value[:200]
    if _NEEDS_QUOTES.search(value) or not value.isprintable():
        return '"' + value.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
    return value
