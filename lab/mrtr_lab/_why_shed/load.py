"""Closed-loop callers of one long call, every answer checked, that stop starting calls when told.

Unlike a fixed window, a scenario decides when the load ends (once its
upgrade or scale-out is over); the calls in flight then finish, so the
latency of the longest ones is never cut off.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import httpx

from benchmarks._cluster import PATIENT, PrimesCall
from mrtr_client import AsyncClient

CALL_TIMEOUT = httpx.Timeout(900.0, connect=5.0)
"""A call that stays where it landed may wait minutes behind others on a worker; it must not be cut off."""


@dataclass(frozen=True)
class Call:
    started: float
    """`time.monotonic()` when the call started."""
    seconds: float
    correct: bool
    hops: tuple[str, ...] = ()
    """Every exchange of the call as `instance:reason:ms` (`--trace`)."""


@dataclass
class Load:
    """What the callers saw: every call they completed and every error."""

    calls: list[Call] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    running: dict[int, float] = field(default_factory=dict)
    """Caller number -> `time.monotonic()` its call in flight started: a window can wait for those calls."""

    def in_flight(self) -> set[tuple[int, float]]:
        """The calls in flight now, as (caller, start) pairs (a copy: callers run on another thread)."""
        return set(dict(self.running).items())

    @property
    def completed(self) -> int:
        """Complete and exact answers."""
        return sum(call.correct for call in self.calls)

    @property
    def wrong(self) -> int:
        return sum(not call.correct for call in self.calls)


async def closed_loop(url: str, call: PrimesCall, callers: int, stop: asyncio.Event, load: Load) -> None:
    """`callers` callers, each calling again as soon as its call returns, until `stop` is set."""
    async with AsyncClient(url, policy=PATIENT, http=httpx.AsyncClient(timeout=CALL_TIMEOUT)) as client:

        async def caller(number: int) -> None:
            while not stop.is_set():
                started = load.running[number] = time.monotonic()
                try:
                    done = await client.call_tool("count_primes", call.arguments)
                except Exception as exc:  # counted, never allowed to stop the benchmark
                    load.errors.append(type(exc).__name__)
                    await asyncio.sleep(0.1)
                    continue
                finally:
                    del load.running[number]
                hops = tuple(f"{hop.instance}:{hop.reason}:{hop.elapsed_ms:.0f}" for hop in done.trace.hops)
                load.calls.append(Call(started, time.monotonic() - started, call.correct(done), hops))

        await asyncio.gather(*(caller(number) for number in range(callers)))
