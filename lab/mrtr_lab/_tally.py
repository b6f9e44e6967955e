"""Closed-loop runs of checked calls, and what they add up to: done in the window, wrong, percentiles."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from mrtr_client import AsyncClient, CallResult
from mrtr_ops.percentiles import percentile

if TYPE_CHECKING:
    from benchmarks._cluster import PrimesCall


class CheckedCall(Protocol):
    @property
    def seconds(self) -> float: ...
    @property
    def in_window(self) -> bool: ...
    @property
    def correct(self) -> bool: ...


CallT = TypeVar("CallT", bound=CheckedCall)


@dataclass
class Tally(Generic[CallT]):
    """Calls of one row; only calls that ended in the window and were right count as done."""

    calls: list[CallT] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stopped_share: float | None = None

    @property
    def done(self) -> int:
        return sum(call.in_window and call.correct for call in self.calls)

    @property
    def wrong(self) -> int:
        return sum(not call.correct for call in self.calls)

    def p(self, q: int) -> float:
        return percentile([call.seconds for call in self.calls], q)


async def closed_loop(
    url: str,
    call: PrimesCall,
    callers: int,
    window: float,
    tally: Tally[CallT],
    record: Callable[[CallResult, float, bool, bool], CallT],
    *,
    task: bool = False,
) -> None:
    """`callers` callers of `call` for `window` seconds, each calling again as soon as its call returns.

    Each answer becomes `record(done, seconds, ended_in_window, correct)` in `tally`; a failed call is
    counted in `tally.errors`, never allowed to stop the benchmark.
    """
    deadline = time.monotonic() + window
    async with AsyncClient(url) as client:

        async def caller() -> None:
            while time.monotonic() < deadline:
                started = time.monotonic()
                try:
                    done = await client.call_tool("count_primes", call.arguments, task=task)
                except Exception as exc:
                    tally.errors.append(type(exc).__name__)
                    await asyncio.sleep(0.1)
                    continue
                ended = time.monotonic()
                tally.calls.append(record(done, ended - started, ended <= deadline, call.correct(done)))

        await asyncio.gather(*(caller() for _ in range(callers)))
