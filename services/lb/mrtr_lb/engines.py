"""The public listener, built: :func:`create_app` (one engine, `mrtr_lb.lean`).

The server, the admin API and the tests build it here, so nothing else imports the engine's package.
"""

from __future__ import annotations

from mrtr_lb.config import Settings
from mrtr_lb.discovery import Resolver
from mrtr_lb.lean.server import LeanServer


def create_app(settings: Settings, *, resolver: Resolver | None = None) -> LeanServer:
    """Build the public listener, not started.

    ``resolver`` replaces DNS lookups for ``MRTR_LB_BACKEND_DNS`` (tests inject one). :func:`mrtr_lb.start_server`
    starts it with the admin listener; to run only the public listener, ``await engine.start()`` then
    ``await engine.stop()``.
    """
    return LeanServer(settings, resolver=resolver)
