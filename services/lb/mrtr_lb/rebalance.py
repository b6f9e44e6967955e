"""Telling the fleet that capacity joined: ``POST /admin/rebalance`` to the other backends.

A worker with shedding on queues a call for a compute slot when all of its
slots are busy; that call moves on only when told that capacity appeared
elsewhere (the worker's ``/admin/rebalance``). The proxy is the one party
that sees capacity appear, whatever brought it (the admin API, DNS or
``tasks.<svc>`` discovery, a worker back from unhealthy, an undrain), so it
tells every other routable backend, at once and in the background:
forwarding never waits for these calls, and a failure is only logged and
counted. The hook's path, its token and its answer (``{"moved": N}``, the
calls that left a queue) are the contract of :mod:`mrtr_protocol.fleet`.

A join and a recovery are treated alike: both mean a routable backend
appeared that was not there a moment ago, and queued calls elsewhere can
use it. Backends routable when the proxy starts are not a join (nothing
was added). Joins within ``debounce`` seconds of the first make one round.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable

import aiohttp

from mrtr_lb.backends import Backend, BackendPool
from mrtr_lb.metrics import LbMetrics
from mrtr_protocol.fleet import REBALANCE_PATH, moved_by

log = logging.getLogger("mrtr_lb.rebalance")


class Rebalancer:
    """Collects joins and sends one round of rebalance calls per debounce window."""

    def __init__(
        self,
        pool: BackendPool,
        session: aiohttp.ClientSession,
        metrics: LbMetrics,
        *,
        token: Callable[[], str | None],
        debounce: float,
        timeout: float,
    ) -> None:
        self._pool = pool
        self._session = session
        self._metrics = metrics
        self._token = token
        self._debounce = debounce
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._joined: set[Backend] = set()
        self._round: asyncio.Task[None] | None = None
        """The round gathering joins (in its debounce sleep), if any."""
        self._rounds: set[asyncio.Task[None]] = set()
        self._off_reason: str | None = None
        self._warned: set[str] = set()

    def joined(self, backend: Backend) -> None:
        """Pool listener (on the event loop): note the join, start a round unless one is gathering joins."""
        if self._off_reason is not None:
            return
        self._joined.add(backend)
        if self._round is None:
            self._round = asyncio.create_task(self._run_round(), name="rebalance round")
            self._rounds.add(self._round)
            self._round.add_done_callback(self._rounds.discard)

    async def _run_round(self) -> None:
        try:
            await asyncio.sleep(self._debounce)
        finally:
            self._round = None  # joins from now on start the next round
        joined, self._joined = self._joined, set()
        targets = [b for b in self._pool if b.eligible and b not in joined]
        if not targets:
            return
        try:
            token = self._token()
        except OSError as exc:
            self._warn_once("token", "cannot read the admin token file (%s): rebalance calls go without it", exc)
            token = None
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        outcomes = await asyncio.gather(*(self._post(b, headers) for b in targets))
        log.info(
            "capacity joined (%s): rebalance sent to %d backend(s): %s",
            ", ".join(sorted(b.url for b in joined)),
            len(targets),
            ", ".join(f"{b.url}={o}" for b, o in zip(targets, outcomes, strict=True)),
        )
        if token is None and "unauthorized" in outcomes:
            self._off_reason = "the workers require an admin token"
            log.warning(
                "rebalance on join is OFF: the workers require an admin token and the proxy has none; "
                "set MRTR_LB_ADMIN_TOKEN or MRTR_LB_ADMIN_TOKEN_FILE to the workers' admin token"
            )

    async def _post(self, backend: Backend, headers: dict[str, str]) -> str:
        """One call; the outcome is counted and returned, never raised."""
        try:
            async with self._session.post(
                backend.url + REBALANCE_PATH, headers=headers, timeout=self._timeout, allow_redirects=False
            ) as resp:
                body = await resp.read()
                status = resp.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            outcome = "unreachable"
            log.warning("rebalance of %s failed: %s %s", backend.url, type(exc).__name__, exc)
        else:
            if 200 <= status < 300:
                outcome = self._moved(backend, body)
            elif status in (401, 403):
                outcome = "unauthorized"
                if headers:
                    self._warn_once("bad token", "%s refused the proxy's admin token (%d)", backend.url, status)
            else:
                outcome = "refused"
                log.warning("rebalance of %s answered %d", backend.url, status)
        self._metrics.rebalance.labels(outcome).inc()
        return outcome

    def _moved(self, backend: Backend, body: bytes) -> str:
        """Count the calls a backend says it moved: "ok", or "refused" for an answer outside the contract."""
        try:
            moved = moved_by(json.loads(body))
        except ValueError as exc:
            log.warning("rebalance of %s: %s", backend.url, exc)
            return "refused"
        self._metrics.rebalance_moved.inc(moved)
        return "ok"

    def _warn_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)

    async def close(self) -> None:
        rounds = list(self._rounds)
        for task in rounds:
            task.cancel()
        for task in rounds:
            with contextlib.suppress(asyncio.CancelledError):
                await task
