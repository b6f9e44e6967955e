"""Round-robin, non-sticky reverse proxy in front of stateless MRTR workers.

Public API::

    from mrtr_lb import Settings, create_app, start_server

    lb = await start_server(Settings(port=0, backends=["http://127.0.0.1:9001"]))
    ...  # clients use lb.url
    await lb.stop()

or ``python -m mrtr_lb --port 8080 --backends http://127.0.0.1:9001,...``.
"""

from mrtr_lb.app import create_app
from mrtr_lb.backends import Backend, BackendPool
from mrtr_lb.config import Settings
from mrtr_lb.discovery import Resolver, system_resolver
from mrtr_lb.server import RunningLB, serve_until_signalled, start_server

__all__ = [
    "Backend",
    "BackendPool",
    "Resolver",
    "RunningLB",
    "Settings",
    "create_app",
    "serve_until_signalled",
    "start_server",
    "system_resolver",
]
