"""What every request through the lean engine shares: the pool, metrics, upstream connections, the read sweep.

The request goes to the backend as one ``write`` on a pooled connection
(:mod:`mrtr_lb.lean.request` builds it); the response head is parsed only to
learn its framing, then passed on. The read timeout is checked by one periodic
sweep over the requests in flight, not by a timer per request. One request's
course is :class:`mrtr_lb.lean.forward.Forward`'s, which is handed this state:
this module does not know it, so the two do not import each other.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Protocol

from mrtr_lb.answers import JSON, jsonrpc_error_body, request_id_of, simple_response
from mrtr_lb.backends import Backend, BackendPool
from mrtr_lb.config import Settings
from mrtr_lb.lean.http import ClientConnection, LeanRequest
from mrtr_lb.lean.request import upstream_request
from mrtr_lb.lean.slots import Slots
from mrtr_lb.lean.upstream import UpstreamPool
from mrtr_lb.metrics import LbMetrics
from mrtr_lb.rules import count_error


class InFlight(Protocol):
    """A request whose bytes went to a backend (a :class:`~mrtr_lb.lean.forward.Forward`), as the sweep sees it."""

    def check_read(self, now: float, timeout: float) -> None: ...


class LeanProxy:
    """What every forwarded request shares: the pool, metrics, upstream connections, the read-timeout sweep."""

    def __init__(self, pool: BackendPool, metrics: LbMetrics, settings: Settings) -> None:
        self.pool = pool
        self.metrics = metrics
        self.settings = settings
        self.upstream = UpstreamPool(connect_timeout=settings.connect_timeout, keepalive=settings.upstream_keepalive)
        self.limit = Slots(settings.max_upstream_connections) if settings.max_upstream_connections else None
        self.active: set[InFlight] = set()
        """Requests whose bytes went to a backend and whose response is not complete yet."""
        self.request_bytes = upstream_request
        self._sweep: asyncio.TimerHandle | None = None
        self._sweep_every = min(1.0, settings.read_timeout / 4)

    def start(self) -> None:
        """Begin the read-timeout sweep (a read timeout is noticed up to a quarter of it, at most 1 s, late)."""
        self._sweep = asyncio.get_running_loop().call_later(self._sweep_every, self._check_reads)

    def _check_reads(self) -> None:
        now, timeout = time.monotonic(), self.settings.read_timeout
        for forward in list(self.active):
            forward.check_read(now, timeout)
        self._sweep = asyncio.get_running_loop().call_later(self._sweep_every, self._check_reads)

    def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        self.upstream.close()

    def error(
        self,
        client: ClientConnection,
        req: LeanRequest,
        status: int,
        message: str,
        *,
        code: int = -32603,
        extra: Sequence[tuple[bytes, bytes]] = (),
    ) -> None:
        body = jsonrpc_error_body(message, code, request_id_of(req.body))
        client.write(
            simple_response(status, body, JSON, keep_alive=req.keep_alive, head=req.method == "HEAD", extra=extra)
        )

    def count_error(self, backend: Backend, kind: str, exc: BaseException) -> None:
        count_error(self.metrics, backend, kind, exc)
