"""Readiness of one worker: ready, then draining, then gone once idle.

Kept apart from the HTTP layer so the computation engine, the admin
endpoint and the SIGTERM handler all flip the same switch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Rebalance:
    """One rebalance signal and the calls queued for a slot that it may move, so the hook can say how many did."""

    def __init__(self) -> None:
        self.kick = asyncio.Event()
        """Set when the rebalance is given: the queued calls listening leave the queue (unless a slot came first)."""
        self._listening = 0
        self._moved = 0
        self._settled = asyncio.Event()
        self._settled.set()

    @contextmanager
    def listening(self) -> Iterator[asyncio.Event]:
        """While a call waits in the queue for a slot, ready to leave on this signal."""
        self._listening += 1
        self._settled.clear()
        try:
            yield self.kick
        finally:
            self._listening -= 1
            if not self._listening:
                self._settled.set()

    def left(self) -> None:
        """A listening call left the queue: counted as moved if the signal was given (not a wait that ran out)."""
        if self.kick.is_set():
            self._moved += 1

    async def moved(self) -> int:
        """Once given: the calls that left the queue for it, counted when every call listening has decided."""
        await self._settled.wait()
        return self._moved


class Lifecycle:
    """Whether this instance takes new work, and how much work it still has."""

    def __init__(self, on_rebalance: Callable[[], None] | None = None) -> None:
        self._draining = False
        self._busy = 0
        self.on_drained: Callable[[], None] | None = None
        """Called once the instance is draining and idle: the host stops the process."""
        self._rebalance = Rebalance()
        self._on_rebalance = on_rebalance
        """Counts each rebalance (the host passes its metric), so an operator can see the proxy's calls arrive."""

    @property
    def ready(self) -> bool:
        return not self._draining

    @property
    def draining(self) -> bool:
        return self._draining

    @property
    def busy_requests(self) -> int:
        return self._busy

    def drain(self) -> None:
        """Stop taking work: readiness turns false, in-flight work hands itself back at its next step."""
        self._draining = True
        self._maybe_finish()

    @property
    def rebalanced(self) -> Rebalance:
        """The next `rebalance`: a call queued for a slot that may move waits on this one."""
        return self._rebalance

    def rebalance(self) -> Rebalance:
        """Capacity appeared elsewhere (a scale-out): calls queued here for a slot move on now, if they may.

        Returns the signal given, whose :meth:`Rebalance.moved` says how many calls left for it."""
        given, self._rebalance = self._rebalance, Rebalance()
        given.kick.set()
        if self._on_rebalance is not None:
            self._on_rebalance()
        return given

    def undrain(self) -> None:
        self._draining = False

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Mark one MCP request in flight."""
        self._busy += 1
        try:
            yield
        finally:
            self._busy -= 1
            if self._busy == 0:
                self._maybe_finish()

    def _maybe_finish(self) -> None:
        if self._draining and self._busy == 0 and self.on_drained is not None:
            self.on_drained()
