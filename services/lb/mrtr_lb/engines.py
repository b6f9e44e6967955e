"""The public listener's engine, as the settings name it: the lean one by default, the reference one on request.

Both have the same shape (:class:`Engine`), so the server, the admin API and
the tests handle either the same way.
"""

from __future__ import annotations

from typing import Protocol

from mrtr_lb.backends import BackendPool
from mrtr_lb.config import Settings
from mrtr_lb.discovery import Resolver
from mrtr_lb.lean.server import LeanServer
from mrtr_lb.metrics import LbMetrics
from mrtr_lb.reference.server import ReferenceServer


class Engine(Protocol):
    """A public listener over its own pool and metrics; ``port`` is the bound one once started."""

    @property
    def pool(self) -> BackendPool: ...
    @property
    def metrics(self) -> LbMetrics: ...
    @property
    def port(self) -> int: ...
    async def start(self) -> Engine: ...
    async def stop(self) -> None: ...


def create_app(settings: Settings, *, resolver: Resolver | None = None) -> Engine:
    """Build the engine ``settings.engine`` names, not started: the lean one unless told ``aiohttp``.

    ``resolver`` replaces DNS lookups for ``MRTR_LB_BACKEND_DNS`` (tests inject one). :func:`mrtr_lb.start_server`
    starts it with the admin listener; to run only the public listener, ``await engine.start()`` then
    ``await engine.stop()``.
    """
    if settings.engine == "lean":
        return LeanServer(settings, resolver=resolver)
    return ReferenceServer(settings, resolver=resolver)
