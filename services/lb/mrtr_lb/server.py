"""Running the application on a socket, for the CLI, tests and the cluster launcher."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from .app import create_app
from .config import Settings
from .discovery import Resolver
from .lean_server import LeanServer

log = logging.getLogger("mrtr_lb")


@dataclass
class RunningLB:
    """A started proxy; ``url`` is where clients connect (the real port if 0 was asked)."""

    host: str
    port: int
    _stop: Callable[[], Awaitable[None]]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        await self._stop()


async def start_server(settings: Settings, *, resolver: Resolver | None = None) -> RunningLB:
    """Start listening on ``settings.host:settings.port`` (port 0 picks a free one) with the configured engine."""
    if settings.engine == "lean":
        lean = await LeanServer(settings, resolver=resolver).start()
        return RunningLB(host=settings.host, port=lean.port, _stop=lean.stop)
    runner = web.AppRunner(
        create_app(settings, resolver=resolver),
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
    return RunningLB(host=settings.host, port=port, _stop=runner.cleanup)


async def serve_until_signalled(settings: Settings) -> None:
    """Serve until SIGTERM or SIGINT, then stop accepting and let open requests finish."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    running = await start_server(settings)
    log.info(
        "listening on %s (engine=%s backends=%s dns=%s)",
        running.url,
        settings.engine,
        ",".join(settings.backends) or "-",
        settings.backend_dns or "-",
    )
    try:
        await stop.wait()
    finally:
        await running.stop()
