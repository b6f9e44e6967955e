"""Running the proxy on its two listeners, for the CLI, tests and the cluster launcher."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from mrtr_lb.admin import Admin
from mrtr_lb.admin_server import AdminServer
from mrtr_lb.aiohttp_bounds import GuardedRunner
from mrtr_lb.app import METRICS_KEY, POOL_KEY, create_app, record_refusal
from mrtr_lb.bounds import Limits
from mrtr_lb.config import Settings
from mrtr_lb.discovery import Resolver
from mrtr_lb.lean_server import LeanServer

log = logging.getLogger("mrtr_lb")


def _url(host: str, port: int) -> str:
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}"


@dataclass
class RunningLB:
    """A started proxy; ``url`` is where clients connect, ``admin_url`` where the operator does."""

    host: str
    port: int
    admin_host: str
    admin_port: int
    _stop: Callable[[], Awaitable[None]]

    @property
    def url(self) -> str:
        return _url(self.host, self.port)

    @property
    def admin_url(self) -> str:
        return _url(self.admin_host, self.admin_port)

    async def stop(self) -> None:
        await self._stop()


async def start_server(settings: Settings, *, resolver: Resolver | None = None) -> RunningLB:
    """Start the public listener (``host:port``, the configured engine) and the admin one (``admin_host:admin_port``).

    Port 0 picks a free port for either.
    """
    if settings.engine == "lean":
        lean = await LeanServer(settings, resolver=resolver).start()
        admin = Admin(lean.pool, lean.metrics)
        port, stop_engine = lean.port, lean.stop
    else:
        app = create_app(settings, resolver=resolver)
        runner = GuardedRunner(
            app,
            limits=Limits.from_settings(settings),
            retry_after=settings.retry_after,
            refused=record_refusal(app),
            access_log=None,  # our own access log carries the MCP fields
            handler_cancellation=True,  # a vanished client closes its upstream stream too
            shutdown_timeout=settings.shutdown_timeout,
        )
        await runner.setup()
        site = web.TCPSite(runner, settings.host, settings.port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        port = int(runner.addresses[0][1]) if runner.addresses else settings.port
        admin, stop_engine = Admin(app[POOL_KEY], app[METRICS_KEY]), runner.cleanup
    try:
        admin_server = await AdminServer(settings, admin).start()
    except BaseException:
        await stop_engine()
        raise

    async def stop() -> None:
        await admin_server.stop()
        await stop_engine()

    return RunningLB(settings.host, port, settings.admin_host, admin_server.port, stop)


async def serve_until_signalled(settings: Settings) -> None:
    """Serve until SIGTERM or SIGINT, then stop accepting and let open requests finish."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    running = await start_server(settings)
    log.info(
        "listening on %s (engine=%s backends=%s file=%s dns=%s), admin on %s",
        running.url,
        settings.engine,
        ",".join(settings.backends) or "-",
        settings.backends_file or "-",
        settings.backend_dns or "-",
        running.admin_url,
    )
    try:
        await stop.wait()
    finally:
        await running.stop()
