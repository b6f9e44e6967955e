"""Discovery: the only ways a backend joins the pool (besides the static list).

DNS: docker-compose answers a service name with one A record per running
replica; re-resolving it every few seconds is all the service discovery a
scaled ``worker`` service needs. The resolver is injectable so tests can
change the answer at will.

A file: the local cluster's launcher writes the URLs of the workers it started
to a file it owns, one a line (like Prometheus's ``file_sd``); the proxy
re-reads it. Nobody on the network can add a backend: the admin API has no
"add", so the fleet's admin token (sent with rebalance calls) only ever goes
to a backend that the operator's own configuration produced.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from yarl import URL

from mrtr_lb.backends import BackendPool
from mrtr_lb.config import normalize_backend_url

log = logging.getLogger("mrtr_lb.discovery")

Endpoint = tuple[str, int]
Resolver = Callable[[str, int], Awaitable[Sequence[Endpoint]]]

_FAMILIES = {"ipv4": socket.AF_INET, "ipv6": socket.AF_INET6, "any": socket.AF_UNSPEC}


def system_resolver(family: str = "ipv4") -> Resolver:
    """A resolver backed by ``getaddrinfo`` (so /etc/hosts and Docker's DNS both work)."""
    fam = _FAMILIES[family]

    async def resolve(host: str, port: int) -> list[Endpoint]:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, family=fam, type=socket.SOCK_STREAM)
        return [(str(info[4][0]), int(info[4][1])) for info in infos]

    return resolve


def endpoint_url(scheme: str, endpoint: Endpoint) -> str:
    host, port = endpoint
    return normalize_backend_url(str(URL.build(scheme=scheme, host=host, port=port)))


class DnsDiscovery:
    """Keeps the pool's ``dns`` backends equal to the latest answer for ``host:port``."""

    def __init__(
        self,
        pool: BackendPool,
        host: str,
        port: int,
        *,
        interval: float,
        resolver: Resolver,
        scheme: str = "http",
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self._pool = pool
        self._host = host
        self._port = port
        self._interval = interval
        self._resolver = resolver
        self._scheme = scheme
        self._on_change = on_change

    async def refresh(self) -> bool:
        """Resolve once and apply the answer; return False if resolution failed.

        A failed lookup keeps the current set: a DNS hiccup must not empty the
        pool, and backends that really vanished fail their health checks anyway.
        """
        try:
            endpoints = await self._resolver(self._host, self._port)
        except (OSError, UnicodeError) as exc:
            log.warning("resolving %s:%s failed: %s", self._host, self._port, exc)
            return False
        urls = sorted({endpoint_url(self._scheme, ep) for ep in endpoints})
        added, removed = self._pool.sync_source("dns", urls)
        if added or removed:
            log.info("dns %s:%s -> %s (+%d -%d)", self._host, self._port, urls or "nothing", len(added), len(removed))
            self._on_change()
        return True

    async def run(self) -> None:
        """Refresh forever (cancel the task to stop)."""
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.refresh()
            except Exception:  # keep discovering even after an unexpected bug
                log.exception("dns refresh crashed")


def read_backends_file(path: Path) -> list[str]:
    """The normalized URLs in ``path``: one a line, blank lines and ``#`` comments ignored.

    Raises OSError if unreadable and ValueError naming the line if a URL is bad.
    """
    urls = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            urls.append(normalize_backend_url(text))
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: {exc}") from None
    return list(dict.fromkeys(urls))


class FileDiscovery:
    """Keeps the pool's ``file`` backends equal to the lines of one file, re-read every ``interval``."""

    def __init__(
        self, pool: BackendPool, path: Path, *, interval: float, on_change: Callable[[], None] = lambda: None
    ) -> None:
        self._pool = pool
        self._path = path
        self._interval = interval
        self._on_change = on_change
        self._last_problem: str | None = None

    def refresh(self) -> bool:
        """Read once and apply; an unreadable or bad file keeps the current set (said once, not every read)."""
        try:
            urls = read_backends_file(self._path)
        except (OSError, ValueError, UnicodeError) as exc:
            problem = str(exc)
            if problem != self._last_problem:
                log.warning("backends file %s not applied (the current set stays): %s", self._path, problem)
                self._last_problem = problem
            return False
        self._last_problem = None
        added, removed = self._pool.sync_source("file", urls)
        if added or removed:
            log.info("file %s -> %s (+%d -%d)", self._path, urls or "nothing", len(added), len(removed))
            self._on_change()
        return True

    async def run(self) -> None:
        """Refresh forever (cancel the task to stop)."""
        while True:
            await asyncio.sleep(self._interval)
            try:
                self.refresh()
            except Exception:  # keep discovering even after an unexpected bug
                log.exception("backends file refresh crashed")
