"""Active health checks: ``GET /readyz`` on every backend, on a fixed interval.

Each backend gets its own loop so that one hanging backend cannot delay the
verdict on the others. Readiness, not liveness, is checked: a draining worker
answers 503 on /readyz and must leave rotation while it finishes its work.
A worker that steps aside as slow (`MRTR_WORKER_STEP_ASIDE`) answers 503
with `"slow": true`: out of rotation the same way, but its return is no join
(no rebalance calls: it comes back for a probe round, not as new capacity).

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
import json
import logging

import aiohttp

from mrtr_lb.backends import STEPPED_ASIDE, Backend, BackendPool

log = logging.getLogger("mrtr_lb.health")


def _unready_reason(path: str, status: int, body: bytes) -> str:
    """Why a backend is out of rotation: a worker stepping aside as slow says so in its body (`"slow": true`)."""
    if status == 503:
        try:
            said = json.loads(body)
        except ValueError:
            said = None
        if isinstance(said, dict) and said.get("slow") is True:
            return STEPPED_ASIDE
    return f"{path} answered {status}"


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
        unresponsive_after: int = 0,
    ) -> None:
        self._pool = pool
        self._session = session
        self._interval = interval
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._path = path if path.startswith("/") else f"/{path}"
        self._unresponsive_after = unresponsive_after
        self._tasks: dict[Backend, asyncio.Task[None]] = {}

    async def check(self, backend: Backend) -> bool:
        """One probe; only a 200 counts as ready, any HTTP answer as alive."""
        answered = False
        try:
            async with self._session.get(
                backend.url + self._path, timeout=self._timeout, allow_redirects=False
            ) as resp:
                body = await resp.read()
                answered = True
                ok = resp.status == 200
                reason = None if ok else _unready_reason(self._path, resp.status, body)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            ok, reason = False, f"{self._path} failed: {type(exc).__name__} {exc}".strip()
        if self._pool.get(backend.url) is backend:
            self._pool.set_health(backend, ok, reason)
        self._count_answer(backend, answered)
        return ok

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
