"""The reference engine's forwarding (aiohttp server and client): one client request to one backend, streamed back.

This is the engine the lean one (:mod:`mrtr_lb.lean`, the default) is tested
against: every test in ``tests/lb`` runs on both, so a behaviour the two
disagree on shows up as a failing case. It keeps the contract in
:mod:`mrtr_lb.rules` (retry only what was never delivered; 502 once bytes may
have reached a worker, 504 when the health checker abandons the backend).
Chosen with ``MRTR_LB_ENGINE=aiohttp``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from mrtr_lb.access import record
from mrtr_lb.backends import Backend, BackendPool
from mrtr_lb.config import Settings
from mrtr_lb.metrics import LbMetrics
from mrtr_lb.rules import (
    ABANDONED,
    BODY_METHODS,
    HOP_BY_HOP,
    REQUEST_DROP,
    UNRESPONSIVE,
    Outcome,
    connect_failed,
    count_error,
    describe,
    no_backend,
    upstream_failed,
)

# Failures raised before a single request byte was written: safe to retry elsewhere.
UNDELIVERED: tuple[type[Exception], ...] = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
# Everything else that can go wrong talking to a backend.
UPSTREAM_FAILURES: tuple[type[Exception], ...] = (aiohttp.ClientError, TimeoutError, OSError)


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
class StreamOutcome(Outcome):
    """:class:`Outcome` with the client response once its headers went out (nothing else can be sent then)."""

    response: web.StreamResponse | None = None


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
        out = StreamOutcome()
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

    async def _handle(self, request: web.Request, out: StreamOutcome) -> web.StreamResponse:
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

    async def _read_body(self, request: web.Request, out: StreamOutcome) -> bytes | web.StreamResponse:
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

    def _reject(self, out: StreamOutcome, status: int, message: str) -> web.Response:
        out.status, out.result = status, "rejected"
        response = jsonrpc_error(status, message, code=-32600)
        response.force_close()  # the unread rest of the body must not be parsed as a request
        return response

    def _unavailable(self, out: StreamOutcome, tried: list[Backend]) -> web.Response:
        out.status, out.result = 503, "no_backend"
        return jsonrpc_error(503, no_backend(len(tried)), headers={"Retry-After": str(self._settings.retry_after)})

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
        out: StreamOutcome,
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
        out: StreamOutcome,
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
            self._pool.set_health(backend, False, connect_failed(exc))
            return None
        except UPSTREAM_FAILURES as exc:
            self._count_error(backend, "upstream", exc)
            out.status, out.result = 502, "upstream_failed"
            return jsonrpc_error(502, upstream_failed(exc))
        return await self._stream(request, backend, upstream, out)

    def _abandoned(self, request: web.Request, backend: Backend, out: StreamOutcome) -> web.StreamResponse:
        """The backend stopped answering while this request ran there: 504, or a cut stream if headers went out."""
        backend.abandoned += 1
        self._count_error(backend, "unresponsive", TimeoutError(UNRESPONSIVE))
        out.result = "abandoned"
        if out.response is not None:
            if request.transport is not None:
                request.transport.close()
            return out.response
        out.status = 504
        return jsonrpc_error(504, ABANDONED)

    async def _stream(
        self,
        request: web.Request,
        backend: Backend,
        upstream: aiohttp.ClientResponse,
        out: StreamOutcome,
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
        count_error(self._metrics, backend, kind, exc)

    def _finish(self, request: web.Request, out: StreamOutcome, started: float) -> None:
        h = request.headers
        record(self._metrics, request.method, request.path, h.get("Mcp-Method"), h.get("Mcp-Name"), out, started)
