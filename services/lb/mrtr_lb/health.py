"""Active health checks: ``GET /readyz`` on every backend, on a fixed interval.

Each backend gets its own loop so that one hanging backend cannot delay the
verdict on the others. Readiness, not liveness, is checked, and only the status
is read (the contract, :mod:`mrtr_protocol.fleet`): 200 is in rotation; a
draining worker answers 503 and must leave rotation while it finishes its work;
a worker that steps aside as slow (`MRTR_WORKER_STEP_ASIDE`) answers 429: out
of rotation the same way, but its return is no join (no rebalance calls: it
comes back for a probe round, not as new capacity).

Backends that are not MRTR workers (any MCP server, say one on the official
SDK, which has no ``/readyz``) are checked another way (`HealthCheck`): by
the status line alone (``http``: any answer under 500 on the health path; the
body, a stream that may never end, is not read) or by a TCP connect (``tcp``).

A backend that gives no answer at all (a paused process, a host cut off the
network) also holds the requests already sent to it. After
`unresponsive_after` such probes in a row those requests are abandoned
(answered 504; the clients retry elsewhere with their last requestState).
A backend removed from the pool keeps being probed while requests still run
on it, so a worker that vanished from DNS with the network cannot hold them
either.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from enum import StrEnum

import aiohttp
from yarl import URL

from mrtr_lb.backends import Backend, BackendPool
from mrtr_protocol.fleet import READINESS_PATH, Readiness

log = logging.getLogger("mrtr_lb.health")


class HealthCheck(StrEnum):
    """How a backend's health is probed (``MRTR_LB_HEALTH_CHECK``)."""

    READYZ = "readyz"
    """The MRTR worker's contract: the health path's status read as `Readiness`."""
    HTTP = "http"
    """Any HTTP server: an answer under 500 on the health path is ready, by its status line alone."""
    TCP = "tcp"
    """Any server: a connection accepted is ready."""


class HealthChecker:
    """Runs one check loop per backend of the pool; call :meth:`sync` after pool changes."""

    def __init__(
        self,
        pool: BackendPool,
        session: aiohttp.ClientSession,
        *,
        interval: float,
        timeout: float,
        path: str = READINESS_PATH,
        unresponsive_after: int = 0,
        how: HealthCheck = HealthCheck.READYZ,
    ) -> None:
        self._pool = pool
        self._session = session
        self._interval = interval
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._path = path if path.startswith("/") else f"/{path}"
        self._unresponsive_after = unresponsive_after
        self._how = how
        self._tasks: dict[Backend, asyncio.Task[None]] = {}

    async def check(self, backend: Backend) -> bool:
        """One probe; any answer counts as alive; the body is never read."""
        answered = False
        try:
            if self._how is HealthCheck.TCP:
                await self._connect(backend)
                answered, readiness, reason = True, Readiness.READY, "connected"
            else:
                async with self._session.get(
                    backend.url + self._path, timeout=self._timeout, allow_redirects=False
                ) as resp:
                    answered = True
                    readiness = self._read(resp.status)
                    reason = f"{self._path} answered {resp.status}"
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            what = "connect" if self._how is HealthCheck.TCP else self._path
            readiness, reason = Readiness.NOT_READY, f"{what} failed: {type(exc).__name__} {exc}".strip()
        ok = readiness is Readiness.READY
        if self._pool.get(backend.url) is backend:
            aside = readiness is Readiness.STEPPED_ASIDE
            self._pool.set_health(backend, ok, None if ok else reason, aside=aside)
        self._count_answer(backend, answered)
        return ok

    def _read(self, status: int) -> Readiness:
        """The worker's contract reads the status as `Readiness`; any other server is ready under 500."""
        if self._how is HealthCheck.READYZ:
            return Readiness.of(status)
        return Readiness.READY if status < 500 else Readiness.NOT_READY

    async def _connect(self, backend: Backend) -> None:
        """A TCP connection opened within the timeout, then closed: the server accepts connections."""
        url = URL(backend.url)
        async with asyncio.timeout(self._timeout.total):
            _, writer = await asyncio.open_connection(url.host, url.port)
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()

    def _count_answer(self, backend: Backend, answered: bool) -> None:
        if answered:
            backend.failed_probes = 0
            return
        backend.failed_probes += 1
        if self._unresponsive_after and backend.failed_probes >= self._unresponsive_after:
            abandoned = backend.abandon_pending()
            if abandoned:
                log.warning(
                    "backend %s gave no answer to %d probes in a row: abandoning %d request(s) running there",
                    backend.url,
                    backend.failed_probes,
                    abandoned,
                )

    async def check_all(self) -> None:
        """Probe every backend once, concurrently (used at startup)."""
        await asyncio.gather(*(self.check(b) for b in self._pool))

    def sync(self) -> None:
        """Start loops for new backends; stop those of removed ones unless requests still run there."""
        present = set(self._pool)
        for backend in present - self._tasks.keys():
            self._tasks[backend] = asyncio.create_task(self._loop(backend), name=f"health {backend.url}")
        for backend in set(self._tasks) - present:
            if not backend.pending:
                self._tasks.pop(backend).cancel()

    def _watched(self, backend: Backend) -> bool:
        return self._pool.get(backend.url) is backend or bool(backend.pending)

    async def _loop(self, backend: Backend) -> None:
        while self._watched(backend):
            try:
                await self.check(backend)
            except Exception:  # a bug here must not silently stop checking
                log.exception("health check of %s crashed", backend.url)
            await asyncio.sleep(self._interval)
        if self._tasks.get(backend) is asyncio.current_task():
            del self._tasks[backend]

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
