"""Round-robin, non-sticky reverse proxy in front of stateless MRTR workers.

Public API::

    from mrtr_lb import Settings, create_app, start_server

    lb = await start_server(Settings(port=0, admin_port=0, backends=["http://127.0.0.1:9001"]))
    ...  # clients use lb.url, the operator lb.admin_url
    await lb.stop()

    engine = await create_app(settings).start()  # the public listener alone
    await engine.stop()

or ``python -m mrtr_lb --port 8080 --backends http://127.0.0.1:9001,...``.

One engine moves the bytes (`lean`); the modules above it hold the rules it keeps.

* `config`: the settings (``MRTR_LB_*``), validated once.
* `rules`: the forwarding contract: hop-by-hop headers, what is retried, the clients' messages,
  a request's outcome, counting a backend's errors.
* `access`: the access log (``mrtr_lb.access``), one line per request;
  `logsink`: its lines written in batches (the CLI).
* `answers`: raw HTTP/1.1 answers (the JSON-RPC error body, a small complete response, the over-the-cap 503).
* `bounds`: what one client connection may make the proxy hold (head, body, deadlines, connections).
* `backends`: the pool, its states and turns; `balancing`: which backend takes the next request.
* `discovery`, `health`, `rebalance`, `background`: who is in the pool, who is routable, telling the fleet that
  capacity joined; the loops that run beside the engine. The worker's side of health and rebalance is
  :mod:`mrtr_protocol.fleet` (the one module of the fleet the proxy imports: no MCP SDK in its image).
* `metrics`: the proxy's Prometheus registry.
* `admin`, `admin_server`: the ``/lb/`` API and its own listener (the operator's token).
* `engines`: `create_app`, the engine built; `server`: both listeners started and stopped.
* `lean`: the engine (asyncio protocols, httptools, uvloop, pooled upstream connections). The aiohttp engine
  it was once tested against is retired; ``MRTR_LB_ENGINE=aiohttp`` is refused at start-up.
"""

from mrtr_lb.backends import Backend, BackendPool
from mrtr_lb.config import Settings
from mrtr_lb.discovery import Resolver, system_resolver
from mrtr_lb.engines import create_app
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
