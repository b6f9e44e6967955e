"""Waiting for a condition: the one polling loop of the ops tools, the benchmarks and their tests.

A wait names what it waits for, so a timeout says which condition did not
hold (`TimeoutError: timed out after 15 s waiting for w2 in the proxy's
rotation`). The predicate is asked at once, then every `interval` seconds
until it answers something truthy or `timeout` seconds have passed; an
exception it raises (a process that died, say) ends the wait at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def _expired(timeout: float, what: str) -> TimeoutError:
    return TimeoutError(f"timed out after {timeout:g} s waiting for {what}")


def wait_until(predicate: Callable[[], T | None], *, timeout: float, interval: float = 0.05, what: str) -> T:
    """Poll `predicate` until it returns a truthy value, and return that value; `TimeoutError` naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _expired(timeout, what)
        time.sleep(interval)


async def wait_until_async(
    predicate: Callable[[], Awaitable[T | None]],
    *,
    timeout: float,  # noqa: ASYNC109  # the same signature as `wait_until`, on purpose
    interval: float = 0.05,
    what: str,
) -> T:
    """`wait_until` on an event loop: the predicate is a coroutine function, the pauses do not block the loop."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _expired(timeout, what)
        await asyncio.sleep(interval)
