"""Admin endpoints under the reserved ``/lb/`` prefix of the proxy's own listener.

They let an operator (or the cluster launcher) see the pool, drain a worker
before stopping it, and scrape metrics, without a second port to manage.
The answers are plain (status, body) pairs so that both forwarding engines
serve the very same admin API.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .backends import BackendPool
from .config import normalize_backend_url
from .metrics import CONTENT_TYPE_LATEST, LbMetrics

PREFIX = "/lb"
JSON = "application/json; charset=utf-8"


@dataclass(frozen=True)
class Reply:
    """One admin answer, independent of the HTTP engine that sends it."""

    status: int
    body: bytes
    content_type: str = JSON


def json_reply(value: object, status: int = 200) -> Reply:
    return Reply(status, json.dumps(value).encode())


def jsonrpc_error_body(message: str, code: int = -32603) -> bytes:
    """A small JSON-RPC error body: MCP clients parse it instead of choking on HTML."""
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()


class Admin:
    """Handlers bound to one pool and one metrics registry."""

    def __init__(self, pool: BackendPool, metrics: LbMetrics) -> None:
        self._pool = pool
        self._metrics = metrics
        self._routes: dict[tuple[str, str], Callable[[Mapping[str, str]], Reply]] = {
            ("GET", "/healthz"): self.healthz,
            ("GET", "/backends"): self.backends,
            ("POST", "/backends/drain"): self.drain,
            ("POST", "/backends/undrain"): self.undrain,
            ("POST", "/backends/add"): self.add,
            ("POST", "/backends/remove"): self.remove,
            ("GET", "/metrics"): self.metrics,
        }

    def answer(self, method: str, path: str, query: Mapping[str, str]) -> Reply:
        """Dispatch one admin request; ``/lb/`` is reserved, so unknown paths are 404, never proxied."""
        method = "GET" if method == "HEAD" else method
        handler = self._routes.get((method, path.removeprefix(PREFIX)))
        if handler is None:
            return Reply(404, jsonrpc_error_body(f"no admin endpoint {path}", code=-32601))
        return handler(query)

    def healthz(self, query: Mapping[str, str]) -> Reply:
        """The proxy itself is alive; says nothing about the workers."""
        eligible = sum(1 for b in self._pool if b.eligible)
        return json_reply({"status": "ok", "backends": len(self._pool), "eligible": eligible})

    def backends(self, query: Mapping[str, str]) -> Reply:
        return json_reply(self._pool.snapshot())

    def drain(self, query: Mapping[str, str]) -> Reply:
        """No new requests for this backend; those in flight finish normally."""
        return self._set_drained(query, True)

    def undrain(self, query: Mapping[str, str]) -> Reply:
        return self._set_drained(query, False)

    def add(self, query: Mapping[str, str]) -> Reply:
        """Put a new backend in the pool; it joins the rotation after its first good health check."""
        url = _backend_url(query)
        if isinstance(url, Reply):
            return url
        backend = self._pool.add(url, "admin")
        self._pool.notify_changed()
        return json_reply(backend.as_json())

    def remove(self, query: Mapping[str, str]) -> Reply:
        """Forget a backend (drain it first); requests already on it finish."""
        url = _backend_url(query)
        if isinstance(url, Reply):
            return url
        backend = self._pool.remove(url)
        if backend is None:
            return json_reply({"error": f"unknown backend {url}"}, status=404)
        self._pool.notify_changed()
        return json_reply(backend.as_json())

    def _set_drained(self, query: Mapping[str, str], drained: bool) -> Reply:
        url = _backend_url(query)
        if isinstance(url, Reply):
            return url
        backend = self._pool.get(url)
        if backend is None:
            return json_reply({"error": f"unknown backend {url}"}, status=404)
        self._pool.set_drained(backend, drained)
        return json_reply(backend.as_json())

    def metrics(self, query: Mapping[str, str]) -> Reply:
        return Reply(200, self._metrics.render(self._pool), CONTENT_TYPE_LATEST)


def _backend_url(query: Mapping[str, str]) -> str | Reply:
    """The normalized `url` query parameter, or a 400 answer saying what is wrong with it."""
    try:
        return normalize_backend_url(query.get("url", ""))
    except ValueError as exc:
        return json_reply({"error": f"bad url: {exc}"}, status=400)
