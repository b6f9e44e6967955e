"""A fixed number of computation slots, with a first-come queue for calls that may not be shed.

MRTR computations and task slices that compute take slots from the same
`Slots`, so admission, pressure and the task runner all see the real load.
The proxy's cap on upstream connections (`mrtr_lb.lean.slots`) is the same
idea with the same names and wording; `tests/lb/test_lb_slots.py` holds both
to one contract.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Slots:
    """A fixed number of slots, taken first come, first served.

    `try_acquire` takes one at once or not at all, `acquire` waits for one in arrival order,
    `release` hands it to the first waiter or frees it; `capacity` and `waiting` say how full it is.
    A waiter cancelled just as it was handed a slot passes the slot on, so none is lost.
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._free = capacity
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._quiet: set[asyncio.Future[None]] = set()
        self._freed = asyncio.Event()

    @property
    def capacity(self) -> int:
        """How many slots there are, taken or not."""
        return self._capacity

    @property
    def available(self) -> bool:
        """Whether `try_acquire` would succeed now: what the task runner checks before taking a slice."""
        return self._free > 0 and not self.queued

    async def wait_available(self) -> None:
        """Return once a slot is free and nobody is queued for it (it is not taken: `try_acquire` may still lose)."""
        while not self.available:
            self._freed.clear()
            await self._freed.wait()

    @property
    def waiting(self) -> int:
        """Calls queued for a slot: the pressure that makes running computations yield (quiet waiters apart)."""
        return sum(1 for fut in self._waiters if not fut.done() and fut not in self._quiet)

    @property
    def queued(self) -> int:
        """Everyone in the line, quiet waiters too."""
        return sum(1 for fut in self._waiters if not fut.done())

    def try_acquire(self) -> bool:
        """Take a slot if one is free and nobody is queued ahead."""
        if self._free > 0 and not self.queued:
            self._free -= 1
            return True
        return False

    async def acquire(self, *, quiet: bool = False) -> None:
        """Wait for a slot in arrival order: `quiet`, a waiter not counted in `waiting` (a task slice taking its
        turn keeps its place in the line but asks no running computation to yield its slot)."""
        if self.try_acquire():
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        if quiet:
            self._quiet.add(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot was handed to us as we were cancelled: pass it on
            raise
        finally:
            self._quiet.discard(waiter)
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def release(self) -> None:
        """Hand the slot to the first waiter, or free it."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1
        self._freed.set()
