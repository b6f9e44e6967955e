"""Wiring: one aiohttp application = pool + health checks + discovery + proxy + admin.

aiohttp serves both sides: its server streams responses chunk by chunk and
its ClientSession pool held up under concurrency in our benchmark (README).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
from aiohttp import web

from .admin import Admin
from .backends import BackendPool
from .config import Settings
from .discovery import DnsDiscovery, Resolver, system_resolver
from .health import HealthChecker
from .metrics import LbMetrics
from .proxy import Proxy, jsonrpc_error

log = logging.getLogger("mrtr_lb")

POOL_KEY = web.AppKey("mrtr_lb.pool", BackendPool)
METRICS_KEY = web.AppKey("mrtr_lb.metrics", LbMetrics)
SETTINGS_KEY = web.AppKey("mrtr_lb.settings", Settings)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def upstream_session(settings: Settings) -> aiohttp.ClientSession:
    """The forwarding client: pooled keep-alive, no cookies, bytes passed through untouched.

    aiohttp re-sends an idempotent request once when a connection breaks under it;
    the proxy turns that off per request (`proxy.send_once`), since the backend may
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


async def _not_proxied(request: web.Request) -> web.Response:
    """Only the configured paths reach the workers: their admin and metrics endpoints stay private."""
    return jsonrpc_error(404, f"{request.path} is not served through this proxy", code=-32601)


def create_app(settings: Settings, *, resolver: Resolver | None = None) -> web.Application:
    """Build the proxy application; background tasks start with the app and stop with it.

    ``resolver`` replaces DNS lookups for ``MRTR_LB_BACKEND_DNS`` (tests inject one).
    """
    app = web.Application(middlewares=[_no_tracebacks], client_max_size=settings.max_body_size + 1)
    pool = BackendPool(settings.backends)
    metrics = LbMetrics()
    app[POOL_KEY] = pool
    app[METRICS_KEY] = metrics
    app[SETTINGS_KEY] = settings

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        async with (
            upstream_session(settings) as session,
            aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(force_close=True), cookie_jar=aiohttp.DummyCookieJar()
            ) as health_session,
        ):
            health = HealthChecker(
                pool,
                health_session,
                interval=settings.health_interval,
                timeout=settings.health_timeout,
                path=settings.health_path,
                unresponsive_after=settings.unresponsive_after,
            )
            tasks: list[asyncio.Task[None]] = []
            target = settings.dns_target
            if target is not None:
                discovery = DnsDiscovery(
                    pool,
                    *target,
                    interval=settings.dns_interval,
                    resolver=resolver or system_resolver(settings.dns_family),
                    scheme=settings.backend_scheme,
                    on_change=health.sync,
                )
                await discovery.refresh()
                tasks.append(asyncio.create_task(discovery.run(), name="dns discovery"))
            # One round of checks before serving, so traffic flows from the first request.
            await health.check_all()
            health.sync()
            pool.subscribe(health.sync)
            proxy.attach(session)
            try:
                yield
            finally:
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                await health.close()

    proxy = Proxy(pool, metrics, settings)
    app.cleanup_ctx.append(lifecycle)
    app.add_routes(Admin(pool, metrics).routes())
    for path in settings.proxy_paths:
        app.router.add_route("*", path, proxy.handle)
    app.router.add_route("*", "/{tail:.*}", _not_proxied)
    return app
