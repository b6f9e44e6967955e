"""The public listener's engine: :class:`Engine` is its shape, :func:`create_app` builds it.

The server, the admin API and the tests hold it by this shape, not by its class.
"""

from __future__ import annotations

from typing import Protocol

from mrtr_lb.backends import BackendPool
from mrtr_lb.config import Settings
from mrtr_lb.discovery import Resolver
from mrtr_lb.lean.server import LeanServer
from mrtr_lb.metrics import LbMetrics


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
    """Build the lean engine, not started.

    ``resolver`` replaces DNS lookups for ``MRTR_LB_BACKEND_DNS`` (tests inject one). :func:`mrtr_lb.start_server`
    starts it with the admin listener; to run only the public listener, ``await engine.start()`` then
    ``await engine.stop()``.
    """
    return LeanServer(settings, resolver=resolver)
