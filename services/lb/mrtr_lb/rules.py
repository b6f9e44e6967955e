"""The forwarding contract the engine keeps: which headers are hop-by-hop, when to retry, what a client is told.

The one rule that shapes the proxy: a request is retried on another backend
only when it provably never left the proxy (the connection could not be
opened). Once bytes may have reached a worker, the worker may have acted on
them, so the client gets a 502 and retries with its own last requestState.
The same holds when the backend stops answering altogether (the health
checker abandons its requests): the client gets a 504 and retries. The engine
(:mod:`mrtr_lb.lean`) and the admin listener take their header sets, messages
and outcome record from here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from mrtr_lb.backends import Backend
from mrtr_lb.metrics import LbMetrics

log = logging.getLogger("mrtr_lb.proxy")

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# The body is re-sent from memory, so its framing headers are recomputed.
REQUEST_DROP = HOP_BY_HOP | {"content-length", "expect"}
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})

ABANDONED = "backend stopped answering; retry with your last requestState"
"""The 504's message when the health checker gives up on a backend with requests running there."""
UNRESPONSIVE = "backend stopped answering health checks"
"""The error counted against that backend (``kind="unresponsive"``)."""


def no_backend(tried: int) -> str:
    """The 503's message when no backend is left to try (``tried`` of them could not be reached)."""
    return f"no backend available ({tried} could not be reached)" if tried else "no backend available"


def not_proxied(path: str) -> str:
    """The 404's message for a path outside ``PROXY_PATHS``: the workers' admin and metrics stay private."""
    return f"{path} is not served through this proxy"


def connect_failed(exc: BaseException) -> str:
    """Why a backend left the rotation at once: its connection could not be opened (the request goes elsewhere)."""
    return f"connect failed: {describe(exc)}"


def upstream_failed(exc: BaseException) -> str:
    """The 502's message once the request may have reached the backend (the proxy does not re-send it)."""
    return f"upstream failed: {describe(exc)}"


def describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}"[:200] if text else type(exc).__name__


def count_error(metrics: LbMetrics, backend: Backend, kind: str, exc: BaseException) -> None:
    """Count a backend's failure (``connect``, ``upstream``, ``unresponsive``) for ``/lb/backends`` and metrics."""
    backend.errors += 1
    backend.last_error = describe(exc)
    metrics.backend_errors.labels(backend.url, kind).inc()
    log.warning("%s error on %s: %s", kind, backend.url, describe(exc))


@dataclass
class Outcome:
    """What happened to one request, for the access log and metrics."""

    backend: str = "-"
    status: int = 0
    attempts: int = 0
    result: str = "ok"
    worker: str | None = None
