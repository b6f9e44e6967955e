"""The reference engine's public listener: its aiohttp application behind the bounds guard, started and stopped.

The same shape as :class:`mrtr_lb.lean.server.LeanServer` (``start``, ``stop``,
``port``, ``pool``, ``metrics``), so :func:`mrtr_lb.start_server` runs either.
"""

from __future__ import annotations

from aiohttp import web

from mrtr_lb.backends import BackendPool
from mrtr_lb.bounds import Limits
from mrtr_lb.config import Settings
from mrtr_lb.discovery import Resolver
from mrtr_lb.metrics import LbMetrics
from mrtr_lb.reference.app import METRICS_KEY, POOL_KEY, create_reference_app, record_refusal
from mrtr_lb.reference.guard import GuardedRunner


class ReferenceServer:
    """The aiohttp application on ``settings.host:port``; :meth:`start` then :meth:`stop`."""

    def __init__(self, settings: Settings, *, resolver: Resolver | None = None) -> None:
        self.settings = settings
        self.app = create_reference_app(settings, resolver=resolver)
        self.pool: BackendPool = self.app[POOL_KEY]
        self.metrics: LbMetrics = self.app[METRICS_KEY]
        self.port = settings.port
        self._runner = GuardedRunner(
            self.app,
            limits=Limits.from_settings(settings),
            retry_after=settings.retry_after,
            refused=record_refusal(self.app),
            access_log=None,  # our own access log carries the MCP fields
            handler_cancellation=True,  # a vanished client closes its upstream stream too
            shutdown_timeout=settings.shutdown_timeout,
        )

    async def start(self) -> ReferenceServer:
        runner, settings = self._runner, self.settings
        await runner.setup()
        site = web.TCPSite(runner, settings.host, settings.port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self.port = int(runner.addresses[0][1]) if runner.addresses else settings.port
        return self

    async def stop(self) -> None:
        """Stop accepting, let open requests finish for up to the shutdown timeout, then close the rest."""
        await self._runner.cleanup()
