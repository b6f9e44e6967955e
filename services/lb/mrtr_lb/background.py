"""What runs beside either forwarding engine: health checks and DNS discovery.

Both engines (aiohttp and lean) share one pool and these loops, so the
balancer's contract (who is in rotation, when requests are abandoned) does
not depend on which engine moves the bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp

from .backends import BackendPool
from .config import Settings
from .discovery import DnsDiscovery, Resolver, system_resolver
from .health import HealthChecker


@contextlib.asynccontextmanager
async def background(settings: Settings, pool: BackendPool, resolver: Resolver | None) -> AsyncIterator[None]:
    """Discover and probe backends; one round of checks first, so traffic flows from the first request."""
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(force_close=True), cookie_jar=aiohttp.DummyCookieJar()
    ) as health_session:
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
        await health.check_all()
        health.sync()
        pool.subscribe(health.sync)
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await health.close()
