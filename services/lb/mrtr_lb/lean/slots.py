"""A fixed number of slots taken first come, first served: the lean engine's cap on upstream connections.

The worker's compute slots (``mrtr_worker.compute.slots``) are the same idea with the same names; the
two services share no code but `mrtr_protocol`'s contract, and ``tests/lb/test_lb_slots.py`` holds both
copies to one contract. Forwarding takes a slot without awaiting when one is free (`Slots.try_acquire`).
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

    @property
    def capacity(self) -> int:
        """How many slots there are, taken or not."""
        return self._capacity

    @property
    def waiting(self) -> int:
        """Calls queued for a slot."""
        return sum(1 for fut in self._waiters if not fut.done())

    def try_acquire(self) -> bool:
        """Take a slot if one is free and nobody is queued ahead."""
        # While a slot is free the queue is empty (`release` frees one only when nobody waits, and nobody queues
        # while one is free), so this is `not self.waiting` without walking the queue on every request.
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return True
        return False

    async def acquire(self) -> None:
        """Wait for a slot in arrival order."""
        if self.try_acquire():
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot was handed to us as we were cancelled: pass it on
            raise
        finally:
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
