"""The backend pool: who exists, who may take traffic, and whose turn it is.

Round robin without any stickiness is deliberate: MRTR workers are stateless,
so any worker can continue any request, and spreading retries across workers
is exactly what lets a long computation hop away from a busy or dying one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

log = logging.getLogger("mrtr_lb.backends")

Source = Literal["static", "dns", "file"]
State = Literal["healthy", "unhealthy", "drained"]


class Abandonable(Protocol):
    """A request running on a backend that can be given up on."""

    def abandon(self) -> bool:
        """Answer 504 (or cut the stream) now; False if the request had already ended."""
        ...


@dataclass(eq=False)
class Backend:
    """One upstream worker plus the counters the admin endpoint reports."""

    url: str
    source: Source = "static"
    healthy: bool = False
    drained: bool = False
    in_flight: int = 0
    requests: int = 0
    errors: int = 0
    retries: int = 0
    last_error: str | None = None
    aside: bool = False
    """Out of rotation because it stepped aside as slow (its /readyz status said so, `mrtr_protocol.fleet`): it
    comes back when it wants a probe round, which brings no capacity, so its return is not a join."""
    last_change: float = field(default_factory=time.time)
    failed_probes: int = 0
    """Health probes in a row that got no HTTP answer at all (timed out, refused, reset)."""
    abandoned: int = 0
    """Requests given up on because this backend stopped answering while they ran."""
    pending: set[Abandonable] = field(default_factory=set, repr=False)
    """The requests running here, each of which the health checker may abandon."""

    @property
    def state(self) -> State:
        """Drained wins over health: an operator's drain must stay visible."""
        if self.drained:
            return "drained"
        return "healthy" if self.healthy else "unhealthy"

    @property
    def eligible(self) -> bool:
        """May this backend receive a new request?"""
        return self.healthy and not self.drained

    def abandon_pending(self) -> int:
        """Give up on every request running here, now (on the event loop); returns how many.

        A backend that stopped answering (paused, cut off) would otherwise hold
        its requests until the read timeout. Each one is answered 504 instead
        and its client retries with its last requestState; the backend may have
        received it, so the proxy itself never re-sends it.
        """
        return sum(1 for request in list(self.pending) if request.abandon())

    def as_json(self) -> dict[str, object]:
        return {
            "url": self.url,
            "state": self.state,
            "healthy": self.healthy,
            "drained": self.drained,
            "source": self.source,
            "in_flight": self.in_flight,
            "requests": self.requests,
            "errors": self.errors,
            "retries": self.retries,
            "failed_probes": self.failed_probes,
            "abandoned": self.abandoned,
            "last_error": self.last_error,
            "aside": self.aside,
            "last_change": self.last_change,
        }


class BackendPool:
    """Ordered set of backends with a round-robin cursor.

    Every mutation happens on the event loop thread, so no locks are needed.
    """

    def __init__(self, urls: Iterable[str] = (), source: Source = "static") -> None:
        self._backends: list[Backend] = []
        self._cursor = 0
        self.picker: Callable[[list[Backend], Collection[Backend]], Backend | None] | None = None
        """Another way to choose (`balancing`, `MRTR_LB_BALANCE`); None: round robin on the cursor below."""
        self._join_listeners: list[Callable[[Backend], None]] = []
        for url in urls:
            self.add(url, source)

    def __iter__(self) -> Iterator[Backend]:
        return iter(list(self._backends))

    def __len__(self) -> int:
        return len(self._backends)

    def on_join(self, listener: Callable[[Backend], None]) -> None:
        """Call `listener` each time a backend becomes routable (healthy and not drained): capacity appeared."""
        self._join_listeners.append(listener)

    def _joined(self, backend: Backend) -> None:
        for listener in self._join_listeners:
            listener(backend)

    def get(self, url: str) -> Backend | None:
        return next((b for b in self._backends if b.url == url), None)

    def add(self, url: str, source: Source = "static") -> Backend:
        """Add a backend (idempotent); it starts unhealthy until its first check."""
        existing = self.get(url)
        if existing is not None:
            return existing
        backend = Backend(url=url, source=source)
        self._backends.append(backend)
        log.info("backend added: %s (%s)", url, source)
        return backend

    def remove(self, url: str) -> Backend | None:
        """Forget a backend; requests already running on it keep their reference."""
        backend = self.get(url)
        if backend is not None:
            self._backends.remove(backend)
            log.info("backend removed: %s", url)
        return backend

    def sync_source(self, source: Source, urls: Iterable[str]) -> tuple[list[Backend], list[Backend]]:
        """Make the backends of one source equal ``urls``; return (added, removed)."""
        wanted = list(dict.fromkeys(urls))
        current = {b.url for b in self._backends if b.source == source}
        # A URL already known from another source stays as it is (and is not "added" again).
        added = [self.add(url, source) for url in wanted if self.get(url) is None]
        removed = [b for url in sorted(current - set(wanted)) if (b := self.remove(url)) is not None]
        return added, removed

    def pick(self, exclude: Iterable[Backend] = ()) -> Backend | None:
        """Next eligible backend in round-robin order, skipping ``exclude``.

        The cursor moves to just after the chosen backend, so skipped (sick or
        drained) backends do not make their successor take a double share.
        """
        excluded: Collection[Backend] = set(exclude) if exclude else ()
        if self.picker is not None:
            return self.picker(self._backends, excluded)
        index = self._round_robin(excluded)
        if index is None:
            return None
        self._cursor = (index + 1) % len(self._backends)
        return self._backends[index]

    def next_pick(self) -> Backend | None:
        """The backend the round robin sends the next request to, the cursor left where it is; None under
        another balance (its choice depends on the requests open when it is asked) or with none in rotation.

        Which old backend a request lands on during a rolling upgrade turns on it, so `/lb/backends` shows it.
        """
        if self.picker is not None:
            return None
        index = self._round_robin(())
        return None if index is None else self._backends[index]

    def _round_robin(self, excluded: Collection[Backend]) -> int | None:
        """The index of the first eligible backend from the cursor on, skipping `excluded`."""
        count = len(self._backends)
        for step in range(count):
            index = (self._cursor + step) % count
            backend = self._backends[index]
            if backend.healthy and not backend.drained and backend not in excluded:
                return index
        return None

    def set_health(self, backend: Backend, healthy: bool, reason: str | None = None, *, aside: bool = False) -> None:
        """Record a health verdict, logging only transitions; ``aside``: unhealthy because it stepped aside."""
        if not healthy:
            backend.last_error = reason
        back_from_aside = healthy and backend.aside
        backend.aside = aside and not healthy
        if backend.healthy == healthy:
            return
        backend.healthy = healthy
        backend.last_change = time.time()
        if healthy:
            backend.last_error = None
            log.info("backend in rotation: %s", backend.url)
            if not backend.drained and not back_from_aside:
                self._joined(backend)
        elif aside:  # every few seconds on a slow worker: expected, not a warning
            log.info("backend out of rotation: %s (stepped aside: %s)", backend.url, reason)
        else:
            log.warning("backend out of rotation: %s (%s)", backend.url, reason)

    def set_drained(self, backend: Backend, drained: bool) -> None:
        if backend.drained != drained:
            backend.drained = drained
            backend.last_change = time.time()
            log.info("backend %s: %s", "drained" if drained else "undrained", backend.url)
            if backend.eligible:
                self._joined(backend)

    def snapshot(self) -> list[dict[str, object]]:
        """Every backend in the pool's order; `next` marks the one the round robin picks next."""
        upcoming = self.next_pick()
        return [{**b.as_json(), "next": b is upcoming} for b in self._backends]
