"""Waiting for a compute slot, and leaving the queue when told (a rebalance) or after a bounded wait.

A prioritized call queues for a slot on the instance it landed on. When
capacity appears elsewhere (a scale-out), the operator's rebalance tells
this instance, and every call queued here that may still move (the policy's
budget) leaves at once: it has run nothing here, so nothing is lost, and the
proxy's round robin takes it to an instance with free slots.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mrtr_worker.compute.slots import Slots


async def wait_for_slot(slots: Slots, kick: asyncio.Event | None, patience: float | None) -> bool:
    """Take a slot (True), or give up the wait (False) once `kick` is set or after `patience` seconds.

    With neither, the wait lasts until a slot is free. A slot handed over just as the wait is given up is
    passed on by `Slots.acquire`, never leaked.
    """
    if kick is None and patience is None:
        await slots.acquire()
        return True
    acquire = asyncio.ensure_future(slots.acquire())
    waits: list[asyncio.Future[Any]] = [acquire]
    if kick is not None:
        waits.append(asyncio.ensure_future(kick.wait()))
    try:
        await asyncio.wait(waits, timeout=patience, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            if not wait.done():
                wait.cancel()
    try:
        await acquire
    except asyncio.CancelledError:
        me = asyncio.current_task()
        if me is not None and me.cancelling():
            raise  # the call itself was cancelled, not only its wait
        return False
    return True
