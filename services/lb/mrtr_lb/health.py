"""Active health checks: ``GET /readyz`` on every backend, on a fixed interval.

Each backend gets its own loop so that one hanging backend cannot delay the
verdict on the others. Readiness, not liveness, is checked: a draining worker
answers 503 on /readyz and must leave rotation while it finishes its work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import aiohttp

from .backends import Backend, BackendPool

log = logging.getLogger("mrtr_lb.health")


class HealthChecker:
    """Runs one check loop per backend of the pool; call :meth:`sync` after pool changes."""

    def __init__(
        self,
        pool: BackendPool,
        session: aiohttp.ClientSession,
        *,
        interval: float,
        timeout: float,
        path: str = "/readyz",
    ) -> None:
        self._pool = pool
        self._session = session
        self._interval = interval
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._path = path if path.startswith("/") else f"/{path}"
        self._tasks: dict[Backend, asyncio.Task[None]] = {}

    async def check(self, backend: Backend) -> bool:
        """One probe; only a 200 counts as ready."""
        try:
            async with self._session.get(
                backend.url + self._path, timeout=self._timeout, allow_redirects=False
            ) as resp:
                await resp.read()
                ok = resp.status == 200
                reason = None if ok else f"{self._path} answered {resp.status}"
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            ok, reason = False, f"{self._path} failed: {type(exc).__name__} {exc}".strip()
        if self._pool.get(backend.url) is backend:
            self._pool.set_health(backend, ok, reason)
        return ok

    async def check_all(self) -> None:
        """Probe every backend once, concurrently (used at startup)."""
        await asyncio.gather(*(self.check(b) for b in self._pool))

    def sync(self) -> None:
        """Start loops for new backends and stop those of removed ones."""
        present = set(self._pool)
        for backend in present - self._tasks.keys():
            self._tasks[backend] = asyncio.create_task(self._loop(backend), name=f"health {backend.url}")
        for backend in set(self._tasks) - present:
            self._tasks.pop(backend).cancel()

    async def _loop(self, backend: Backend) -> None:
        while True:
            try:
                await self.check(backend)
            except Exception:  # a bug here must not silently stop checking
                log.exception("health check of %s crashed", backend.url)
            await asyncio.sleep(self._interval)

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
