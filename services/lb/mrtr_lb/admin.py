"""Admin endpoints under the reserved ``/lb/`` prefix of the proxy's own listener.

They let an operator (or the cluster launcher) see the pool, drain a worker
before stopping it, and scrape metrics, without a second port to manage.
"""

from __future__ import annotations

from aiohttp import web

from .backends import BackendPool
from .config import normalize_backend_url
from .metrics import CONTENT_TYPE_LATEST, LbMetrics
from .proxy import jsonrpc_error

PREFIX = "/lb"


class Admin:
    """Handlers bound to one pool and one metrics registry."""

    def __init__(self, pool: BackendPool, metrics: LbMetrics) -> None:
        self._pool = pool
        self._metrics = metrics

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get(f"{PREFIX}/healthz", self.healthz),
            web.get(f"{PREFIX}/backends", self.backends),
            web.post(f"{PREFIX}/backends/drain", self.drain),
            web.post(f"{PREFIX}/backends/undrain", self.undrain),
            web.post(f"{PREFIX}/backends/add", self.add),
            web.post(f"{PREFIX}/backends/remove", self.remove),
            web.get(f"{PREFIX}/metrics", self.metrics),
            web.route("*", PREFIX + "/{tail:.*}", self.not_found),
        ]

    async def healthz(self, request: web.Request) -> web.Response:
        """The proxy itself is alive; says nothing about the workers."""
        eligible = sum(1 for b in self._pool if b.eligible)
        return web.json_response({"status": "ok", "backends": len(self._pool), "eligible": eligible})

    async def backends(self, request: web.Request) -> web.Response:
        return web.json_response(self._pool.snapshot())

    async def drain(self, request: web.Request) -> web.Response:
        """No new requests for this backend; those in flight finish normally."""
        return self._set_drained(request, True)

    async def undrain(self, request: web.Request) -> web.Response:
        return self._set_drained(request, False)

    async def add(self, request: web.Request) -> web.Response:
        """Put a new backend in the pool; it joins the rotation after its first good health check."""
        url = _backend_url(request)
        if isinstance(url, web.Response):
            return url
        backend = self._pool.add(url, "admin")
        self._pool.notify_changed()
        return web.json_response(backend.as_json())

    async def remove(self, request: web.Request) -> web.Response:
        """Forget a backend (drain it first); requests already on it finish."""
        url = _backend_url(request)
        if isinstance(url, web.Response):
            return url
        backend = self._pool.remove(url)
        if backend is None:
            return web.json_response({"error": f"unknown backend {url}"}, status=404)
        self._pool.notify_changed()
        return web.json_response(backend.as_json())

    def _set_drained(self, request: web.Request, drained: bool) -> web.Response:
        url = _backend_url(request)
        if isinstance(url, web.Response):
            return url
        backend = self._pool.get(url)
        if backend is None:
            return web.json_response({"error": f"unknown backend {url}"}, status=404)
        self._pool.set_drained(backend, drained)
        return web.json_response(backend.as_json())

    async def metrics(self, request: web.Request) -> web.Response:
        response = web.Response(body=self._metrics.render(self._pool))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def not_found(self, request: web.Request) -> web.Response:
        """``/lb/`` is reserved: unknown admin paths are never proxied."""
        return jsonrpc_error(404, f"no admin endpoint {request.path}", code=-32601)


def _backend_url(request: web.Request) -> str | web.Response:
    """The normalized `url` query parameter, or a 400 response saying what is wrong with it."""
    try:
        return normalize_backend_url(request.query.get("url", ""))
    except ValueError as exc:
        return web.json_response({"error": f"bad url: {exc}"}, status=400)
