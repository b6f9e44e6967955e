"""Running the proxy on its two listeners, for the CLI, tests and the cluster launcher."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mrtr_lb.admin import Admin
from mrtr_lb.admin_server import AdminServer
from mrtr_lb.config import Settings
from mrtr_lb.discovery import Resolver
from mrtr_lb.engines import create_app

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
    engine = await create_app(settings, resolver=resolver).start()
    try:
        admin_server = await AdminServer(settings, Admin(engine.pool, engine.metrics)).start()
    except BaseException:
        await engine.stop()
        raise

    async def stop() -> None:
        await admin_server.stop()
        await engine.stop()

    return RunningLB(settings.host, engine.port, settings.admin_host, admin_server.port, stop)


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
