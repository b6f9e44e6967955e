"""One first-come slot queue, two copies: the proxy's upstream-connection cap and the worker's compute slots.

The proxy may not import the worker (nor the wire package, which brings the MCP SDK), so
`mrtr_lb.lean.slots.Slots` repeats `mrtr_worker.compute.slots.Slots` under the same names;
these cases hold both to one contract. In-process; tasks wait for event-loop turns, not the clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

import pytest

from mrtr_lb.lean.slots import Slots as ProxySlots
from mrtr_worker.compute.slots import Slots as WorkerSlots


class SlotQueue(Protocol):
    @property
    def capacity(self) -> int: ...
    @property
    def waiting(self) -> int: ...
    def try_acquire(self) -> bool: ...
    async def acquire(self) -> None: ...
    def release(self) -> None: ...


KINDS: list[Callable[[int], SlotQueue]] = [ProxySlots, WorkerSlots]


async def settled(condition: Callable[[], bool], what: str) -> None:
    for _ in range(100):
        if condition():
            return
        await asyncio.sleep(0)  # one event loop turn: lets queued tasks reach their next await
    raise AssertionError(f"not reached after 100 event loop turns: {what}")


def free_slots(slots: SlotQueue) -> int:
    """Take every free slot and give them back: how many were free."""
    taken = 0
    while slots.try_acquire():
        taken += 1
    for _ in range(taken):
        slots.release()
    return taken


def test_the_two_copies_share_one_vocabulary() -> None:
    public = {name for name in dir(ProxySlots) if not name.startswith("_")}
    assert public <= {name for name in dir(WorkerSlots) if not name.startswith("_")}
    assert public == {"acquire", "capacity", "release", "try_acquire", "waiting"}
    assert ProxySlots.__doc__ == WorkerSlots.__doc__
    for name in public:  # the same wording; a copy may add what it is for after a colon
        proxy_doc, worker_doc = (str(getattr(kind, name).__doc__) for kind in (ProxySlots, WorkerSlots))
        assert worker_doc.split(":")[0].rstrip(".") == proxy_doc.split(":")[0].rstrip("."), name


@pytest.mark.parametrize("kind", KINDS)
def test_capacity_bounds_try_acquire(kind: Callable[[int], SlotQueue]) -> None:
    slots = kind(2)
    assert slots.capacity == 2
    assert slots.try_acquire()
    assert slots.try_acquire()
    assert not slots.try_acquire()
    slots.release()
    slots.release()
    assert free_slots(slots) == 2
    assert slots.capacity == 2


@pytest.mark.parametrize("kind", KINDS)
async def test_waiters_are_served_in_arrival_order_before_newcomers(kind: Callable[[int], SlotQueue]) -> None:
    slots = kind(1)
    assert slots.try_acquire()
    order: list[str] = []

    async def wait(name: str) -> None:
        await slots.acquire()
        order.append(name)

    tasks = []
    for name in ("a", "b"):
        tasks.append(asyncio.create_task(wait(name)))
        await settled(lambda: slots.waiting == len(tasks), f"{name} queued")
    slots.release()
    await settled(lambda: order == ["a"], "a served")
    assert not slots.try_acquire(), "a freed slot must go to the queue, not to a newcomer"
    slots.release()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert order == ["a", "b"]
    slots.release()
    assert free_slots(slots) == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_a_cancelled_waiter_leaves_the_queue(kind: Callable[[int], SlotQueue]) -> None:
    slots = kind(1)
    assert slots.try_acquire()
    first = asyncio.create_task(slots.acquire())
    await settled(lambda: slots.waiting == 1, "first queued")
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert slots.waiting == 0
    slots.release()
    assert free_slots(slots) == 1, "no slot lost or made up"


@pytest.mark.parametrize("kind", KINDS)
async def test_a_slot_handed_to_a_waiter_cancelled_before_it_woke_is_passed_on(
    kind: Callable[[int], SlotQueue],
) -> None:
    slots = kind(1)
    assert slots.try_acquire()
    first = asyncio.create_task(slots.acquire())
    await settled(lambda: slots.waiting == 1, "first queued")
    second = asyncio.create_task(slots.acquire())
    await settled(lambda: slots.waiting == 2, "second queued")
    slots.release()  # hands the slot to `first` ...
    first.cancel()  # ... which is cancelled before it runs again
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second, 5)
    assert not slots.try_acquire()
    slots.release()
    assert free_slots(slots) == 1, "no slot lost or made up"
