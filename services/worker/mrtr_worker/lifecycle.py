"""Readiness of one worker: ready, then draining, then gone once idle.

Kept apart from the HTTP layer so the computation engine, the admin
endpoint and the SIGTERM handler all flip the same switch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Lifecycle:
    """Whether this instance takes new work, and how much work it still has."""

    def __init__(self, on_rebalance: Callable[[], None] | None = None) -> None:
        self._draining = False
        self._busy = 0
        self.on_drained: Callable[[], None] | None = None
        """Called once the instance is draining and idle: the host stops the process."""
        self._rebalance = asyncio.Event()
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
    def rebalanced(self) -> asyncio.Event:
        """Set by the next `rebalance`: a call queued for a slot now waits on this one."""
        return self._rebalance

    def rebalance(self) -> None:
        """Capacity appeared elsewhere (a scale-out): calls queued here for a slot move on now, if they may."""
        event, self._rebalance = self._rebalance, asyncio.Event()
        event.set()
        if self._on_rebalance is not None:
            self._on_rebalance()

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
