"""Slots: a fixed number of computation slots and a first-come queue, including cancelled waiters.

In-process only. Tasks are never timed: `settled` yields to the event loop
until a condition holds (each waiter needs one turn to queue up).
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Callable
from functools import partial

import pytest

from mrtr_worker.compute.slots import Slots

TURNS = 100
"""Event loop turns `settled` gives a condition before failing (one or two suffice)."""


async def settled(condition: Callable[[], bool], what: str) -> None:
    for _ in range(TURNS):
        if condition():
            return
        await asyncio.sleep(0)  # one event loop turn: lets queued tasks reach their next await
    raise AssertionError(f"not reached after {TURNS} event loop turns: {what}")


def free_slots(slots: Slots) -> int:
    """Take every free slot and give them back: how many were free."""
    taken = 0
    while slots.try_acquire():
        taken += 1
    for _ in range(taken):
        slots.release()
    return taken


def test_try_acquire_takes_up_to_capacity_and_release_frees() -> None:
    slots = Slots(2)
    assert slots.try_acquire()
    assert slots.try_acquire()
    assert not slots.try_acquire()
    slots.release()
    assert slots.try_acquire()
    assert not slots.try_acquire()
    slots.release()
    slots.release()
    assert free_slots(slots) == 2
    assert slots.waiting == 0


def test_zero_capacity_never_grants_a_slot() -> None:
    assert not Slots(0).try_acquire()


async def test_acquire_with_a_free_slot_does_not_queue() -> None:
    slots = Slots(1)
    await asyncio.wait_for(slots.acquire(), 5)
    assert slots.waiting == 0
    assert not slots.try_acquire()


async def test_waiters_are_served_in_arrival_order() -> None:
    slots = Slots(1)
    assert slots.try_acquire()
    order: list[str] = []

    async def wait(name: str) -> None:
        await slots.acquire()
        order.append(name)

    tasks = []
    for name in ("a", "b", "c"):
        tasks.append(asyncio.create_task(wait(name)))
        await settled(lambda: slots.waiting == len(tasks), f"{name} queued")

    slots.release()  # the slot goes to the first waiter, it is not freed
    await settled(lambda: order == ["a"], "a served")
    assert slots.waiting == 2
    assert not slots.try_acquire(), "a freed slot must go to the queue, not to a newcomer"

    slots.release()
    slots.release()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert order == ["a", "b", "c"]
    assert slots.waiting == 0
    slots.release()  # c's slot: now free again
    assert free_slots(slots) == 1


async def test_try_acquire_refuses_while_someone_is_queued() -> None:
    slots = Slots(1)
    assert slots.try_acquire()
    waiter = asyncio.create_task(slots.acquire())
    await settled(lambda: slots.waiting == 1, "waiter queued")
    assert not slots.try_acquire()
    slots.release()
    await asyncio.wait_for(waiter, 5)
    assert not slots.try_acquire()  # the waiter holds it
    slots.release()
    assert free_slots(slots) == 1


async def test_a_quiet_waiter_keeps_its_place_but_is_no_pressure() -> None:
    slots = Slots(1)
    assert slots.try_acquire()
    order: list[str] = []

    async def wait(name: str, *, quiet: bool = False) -> None:
        await slots.acquire(quiet=quiet)
        order.append(name)

    call = asyncio.create_task(wait("call"))
    await settled(lambda: slots.queued == 1, "the call queued")
    turn = asyncio.create_task(wait("task", quiet=True))
    await settled(lambda: slots.queued == 2, "the task's turn queued")
    assert slots.waiting == 1, "a quiet waiter asks no running computation to yield"
    assert not slots.available
    assert not slots.try_acquire()
    late = asyncio.create_task(wait("late call"))
    await settled(lambda: slots.queued == 3, "a later call queued")

    for name in ("call", "task", "late call"):
        slots.release()
        await settled(partial(operator.contains, order, name), f"{name} served")
    await asyncio.wait_for(asyncio.gather(call, turn, late), 5)
    assert order == ["call", "task", "late call"]
    slots.release()
    assert free_slots(slots) == 1


async def test_a_cancelled_quiet_waiter_leaves_no_trace() -> None:
    slots = Slots(1)
    assert slots.try_acquire()
    turn = asyncio.create_task(slots.acquire(quiet=True))
    await settled(lambda: slots.queued == 1, "the turn queued")
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    assert (slots.queued, slots.waiting) == (0, 0)
    slots.release()
    assert slots.available
    assert free_slots(slots) == 1


async def test_cancelled_waiter_leaves_the_queue_and_takes_no_slot() -> None:
    slots = Slots(1)
    assert slots.try_acquire()
    first = asyncio.create_task(slots.acquire())
    await settled(lambda: slots.waiting == 1, "first queued")
    second = asyncio.create_task(slots.acquire())
    await settled(lambda: slots.waiting == 2, "second queued")

    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert slots.waiting == 1

    slots.release()  # skips the cancelled waiter
    await asyncio.wait_for(second, 5)
    assert slots.waiting == 0
    assert not slots.try_acquire()
    slots.release()
    assert free_slots(slots) == 1, "no slot lost or made up"


async def test_cancelled_last_waiter_then_release_frees_the_slot() -> None:
    slots = Slots(1)
    assert slots.try_acquire()
    waiter = asyncio.create_task(slots.acquire())
    await settled(lambda: slots.waiting == 1, "waiter queued")
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert slots.waiting == 0
    slots.release()
    assert free_slots(slots) == 1


async def test_slot_handed_to_a_waiter_cancelled_before_it_woke_is_passed_on() -> None:
    slots = Slots(1)
    assert slots.try_acquire()
    first = asyncio.create_task(slots.acquire())
    await settled(lambda: slots.waiting == 1, "first queued")
    second = asyncio.create_task(slots.acquire())
    await settled(lambda: slots.waiting == 2, "second queued")

    slots.release()  # hands the slot to `first` ...
    first.cancel()  # ... which is cancelled before it runs again
    with pytest.raises(asyncio.CancelledError):
        await first

    await asyncio.wait_for(second, 5)  # `first` passed its slot on
    assert slots.waiting == 0
    assert not slots.try_acquire()
    slots.release()
    assert free_slots(slots) == 1, "no slot lost or made up"


async def test_slot_handed_to_the_only_waiter_cancelled_before_it_woke_is_freed() -> None:
    slots = Slots(1)
    assert slots.try_acquire()
    waiter = asyncio.create_task(slots.acquire())
    await settled(lambda: slots.waiting == 1, "waiter queued")

    slots.release()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter

    assert free_slots(slots) == 1, "the cancelled waiter's slot was lost"
