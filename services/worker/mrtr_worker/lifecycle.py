"""Readiness of one worker: ready, then draining, then gone.

Kept apart from the HTTP layer so the computation engine, the admin
endpoint and the SIGTERM handler all flip the same switch.
"""

from __future__ import annotations

import asyncio


class Lifecycle:
    """Whether this instance should receive new traffic."""

    def __init__(self) -> None:
        self._draining = asyncio.Event()

    @property
    def ready(self) -> bool:
        return not self._draining.is_set()

    @property
    def draining(self) -> bool:
        return self._draining.is_set()

    def drain(self) -> None:
        """Stop taking work: readiness turns false, in-flight work hands itself back."""
        self._draining.set()

    def undrain(self) -> None:
        self._draining.clear()

    async def wait_draining(self) -> None:
        await self._draining.wait()
