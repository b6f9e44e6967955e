"""Wiring of the reference engine (aiohttp): one aiohttp application = pool + background checks + proxy.

The admin API is not here: it is on the admin listener (:mod:`mrtr_lb.admin_server`), shared by both engines.

aiohttp serves both sides: its server streams responses chunk by chunk and
its ClientSession pool held up under concurrency in our benchmark (README).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
from aiohttp import web

from mrtr_lb.access import record
from mrtr_lb.backends import BackendPool
from mrtr_lb.background import background
from mrtr_lb.balancing import picker
from mrtr_lb.config import Settings
from mrtr_lb.discovery import Resolver
from mrtr_lb.metrics import LbMetrics
from mrtr_lb.reference.proxy import Proxy, jsonrpc_error
from mrtr_lb.rules import Outcome, not_proxied

log = logging.getLogger("mrtr_lb")

POOL_KEY = web.AppKey("mrtr_lb.pool", BackendPool)
METRICS_KEY = web.AppKey("mrtr_lb.metrics", LbMetrics)
SETTINGS_KEY = web.AppKey("mrtr_lb.settings", Settings)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def upstream_session(settings: Settings) -> aiohttp.ClientSession:
    """The forwarding client: pooled keep-alive, no cookies, bytes passed through untouched.

    aiohttp re-sends an idempotent request once when a connection breaks under it;
    the proxy turns that off per request (:func:`mrtr_lb.reference.proxy.send_once`), since the backend may
    already have acted on the first copy.
    """
    keepalive = settings.upstream_keepalive
    connector = aiohttp.TCPConnector(
        limit=settings.max_upstream_connections,
        limit_per_host=0,
        force_close=keepalive == 0,
        keepalive_timeout=keepalive if keepalive > 0 else None,
    )
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(
            total=None, sock_connect=settings.connect_timeout, sock_read=settings.read_timeout
        ),
        cookie_jar=aiohttp.DummyCookieJar(),  # never share one client's cookies with another
        auto_decompress=False,
        skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
        trust_env=False,
    )


@web.middleware
async def _no_tracebacks(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Last line of defence: a bug becomes a JSON error for the client, a traceback in our log."""
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception as exc:
        log.exception("unhandled error for %s %s", request.method, request.path)
        return jsonrpc_error(500, f"load balancer error: {type(exc).__name__}")


@web.middleware
async def _no_upgrades(request: web.Request, handler: Handler) -> web.StreamResponse:
    """CONNECT and protocol upgrades get one refusal and a close, on every path: what follows is not HTTP."""
    refusal = None
    if request.method == "CONNECT":
        refusal = (501, "CONNECT is not supported")
    elif request.headers.get("Upgrade") and "upgrade" in request.headers.get("Connection", "").lower():
        refusal = (400, "protocol upgrades are not supported")
    if refusal is None:
        return await handler(request)
    response = jsonrpc_error(refusal[0], refusal[1], code=-32600)
    response.force_close()
    return response


async def _not_proxied(request: web.Request) -> web.Response:
    """Only the configured paths reach the workers: their admin and metrics endpoints stay private."""
    return jsonrpc_error(404, not_proxied(request.path), code=-32601)


def create_reference_app(settings: Settings, *, resolver: Resolver | None = None) -> web.Application:
    """Build the reference engine as a plain aiohttp application; background tasks start with the app and stop with it.

    ``resolver`` replaces DNS lookups for ``MRTR_LB_BACKEND_DNS`` (tests inject one).
    """
    app = web.Application(middlewares=[_no_tracebacks, _no_upgrades], client_max_size=settings.max_body_size + 1)
    pool = BackendPool(settings.backends)
    pool.picker = picker(settings.balance)
    metrics = LbMetrics()
    app[POOL_KEY] = pool
    app[METRICS_KEY] = metrics
    app[SETTINGS_KEY] = settings
    proxy = Proxy(pool, metrics, settings)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        async with upstream_session(settings) as session, background(settings, pool, resolver, metrics):
            proxy.attach(session)
            yield

    app.cleanup_ctx.append(lifecycle)
    for path in settings.proxy_paths:
        app.router.add_route("*", path, proxy.handle)
    app.router.add_route("*", "/{tail:.*}", _not_proxied)
    return app


def record_refusal(app: web.Application) -> Callable[[str, str, str | None, str | None, int], None]:
    """What the aiohttp engine's guard calls for each refused request: its access-log line and metrics when the
    path is a proxied one, as the lean engine records a refusal."""
    metrics, paths = app[METRICS_KEY], frozenset(app[SETTINGS_KEY].proxy_paths)

    def refused(method: str, path: str, mcp_method: str | None, mcp_name: str | None, status: int) -> None:
        if path in paths:
            out = Outcome(status=status, result="rejected")
            record(metrics, method, path, mcp_method, mcp_name, out, time.perf_counter())

    return refused
