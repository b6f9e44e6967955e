"""The admin API (``/lb/...``), served on the admin listener only (:mod:`admin_server`), never the public one.

It lets an operator see the pool, drain a worker before stopping it, and
scrape metrics. There is no "add": a backend joins only through the configured
discovery (static list, DNS, the launcher's file), so a caller can neither put
a listener of its own into the rotation nor have the fleet's admin token sent
to one. The answers are plain (status, body) pairs, independent of the engine.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mrtr_lb.answers import JSON, jsonrpc_error_body
from mrtr_lb.backends import BackendPool
from mrtr_lb.config import normalize_backend_url
from mrtr_lb.metrics import CONTENT_TYPE_LATEST, LbMetrics

PREFIX = "/lb"
OPEN = frozenset({("GET", "/lb/healthz")})
"""What the admin listener answers without the operator token: the orchestrator's liveness probe (it says only
that the proxy runs and how many backends it has), like the workers' /healthz and HAProxy's `monitor-uri`."""

log = logging.getLogger("mrtr_lb.admin")


@dataclass(frozen=True)
class Reply:
    """One admin answer, independent of the HTTP engine that sends it."""

    status: int
    body: bytes
    content_type: str = JSON


def json_reply(value: object, status: int = 200) -> Reply:
    return Reply(status, json.dumps(value).encode())


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


def authorize(method: str, path: str, authorization: str | None, token: Callable[[], str | None]) -> Reply | None:
    """None if the caller may go on; else the refusal (401 without or with a wrong token, 403 if none is set).

    ``token`` is the fleet's admin token (``MRTR_LB_ADMIN_TOKEN(_FILE)``, read again for every call so a
    rotated file counts); compared in constant time.
    """
    if (("GET" if method == "HEAD" else method), path) in OPEN:
        return None
    try:
        expected = token()
    except OSError as exc:
        log.warning("the admin token file is unreadable (%s): the admin API refuses every call", exc)
        expected = None
    if expected is None:
        return json_reply({"error": "the admin API is off: set MRTR_LB_ADMIN_TOKEN or MRTR_LB_ADMIN_TOKEN_FILE"}, 403)
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected.encode()):
        return Reply(401, json.dumps({"error": "the operator's bearer token is required"}).encode())
    return None


def log_call(caller: str, method: str, path: str, query: Mapping[str, str], status: int) -> None:
    """Who did what on the admin API: every change, and every refusal, with the caller's address.

    Reads that succeed (the scrapes, the probes) are logged at DEBUG only.
    """
    target = f" url={query['url'][:200]!r}" if "url" in query else ""
    level = logging.DEBUG if method in ("GET", "HEAD") and status < 400 else logging.INFO
    if status in (401, 403):
        level = logging.WARNING
    log.log(level, "admin %s %r%s from %s -> %d", method, path[:200], target, caller or "-", status)
