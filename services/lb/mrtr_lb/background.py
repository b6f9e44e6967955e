"""What runs beside the forwarding engine: health checks, DNS discovery, rebalance on join.

They share the engine's pool, so who is in rotation and when requests are
abandoned is decided here, not where the bytes move. aiohttp is their HTTP
client (a probe or a rebalance call a few times a second, off the hot path).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import aiohttp

from mrtr_lb.backends import BackendPool
from mrtr_lb.config import Settings
from mrtr_lb.discovery import DnsDiscovery, FileDiscovery, Resolver, system_resolver
from mrtr_lb.health import HealthChecker
from mrtr_lb.metrics import LbMetrics
from mrtr_lb.rebalance import Rebalancer

log = logging.getLogger("mrtr_lb")


@contextlib.asynccontextmanager
async def background(
    settings: Settings, pool: BackendPool, resolver: Resolver | None, metrics: LbMetrics
) -> AsyncIterator[None]:
    """Discover and probe backends; one round of checks first, so traffic flows from the first request.

    Rebalance on join listens only after that first round: the start-up set is not capacity that joined.
    """
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
            how=settings.health_check,
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
        if settings.backends_file is not None:
            from_file = FileDiscovery(
                pool, settings.backends_file, interval=settings.backends_file_interval, on_change=health.sync
            )
            from_file.refresh()
            tasks.append(asyncio.create_task(from_file.run(), name="file discovery"))
        await health.check_all()
        health.sync()  # membership changes later come from discovery, which re-syncs it (`on_change`)
        rebalancer = _rebalancer(settings, pool, health_session, metrics)
        try:
            yield
        finally:
            if rebalancer is not None:
                await rebalancer.close()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await health.close()


def _rebalancer(
    settings: Settings, pool: BackendPool, session: aiohttp.ClientSession, metrics: LbMetrics
) -> Rebalancer | None:
    """Listen for joins (unless MRTR_LB_REBALANCE_ON_JOIN is off); say once at start what it will do."""
    if not settings.rebalance_on_join:
        log.info("rebalance on join: off (MRTR_LB_REBALANCE_ON_JOIN=false)")
        return None
    try:
        token = "with an admin token" if settings.admin_token_text() is not None else "without an admin token"
    except OSError as exc:  # read again for every round: a secret mounted late still counts
        token = f"the admin token file is unreadable for now ({exc}); it is read again for each round"
    log.info("rebalance on join: on, %s", token)
    rebalancer = Rebalancer(
        pool,
        session,
        metrics,
        token=settings.admin_token_text,
        debounce=settings.rebalance_debounce,
        timeout=settings.rebalance_timeout,
    )
    pool.on_join(rebalancer.joined)
    return rebalancer
