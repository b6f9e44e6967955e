"""The spike's load: long computations arriving open loop by a schedule of demand, short calls at a fixed rate.

Demand is a multiple of the fleet's capacity in computation steps per second: a phase of factor 1.4
starts `count_primes` calls (the `MIX`, in turn) at 1.4 x capacity / mean steps per call, whatever the
answers do, so an overload cannot hold back the arrivals (no coordinated omission). One call in
`TASK_EVERY` is made as a task (the tasks extension: created, run in slices from Redis by any worker,
followed to its result); a task whose caller gives up is cancelled. The long calls run
in a child process (their client work must not delay the short calls' sender); each has a deadline,
after which the client gives up on it: a timeout, which is lost work, never a clean refusal. Every
record carries times on `time.monotonic()`, the clock every process on the machine shares.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from dataclasses import dataclass
from multiprocessing.queues import Queue
from typing import Any

from benchmarks._cluster import MIX, PATIENT
from benchmarks._load import Sent, echo_request, is_complete, open_loop
from mrtr_client import AsyncClient, MrtrError, RpcError

DEADLINE_S = 60.0
"""A long call's deadline from its arrival: beyond it the caller gives up (a timeout, counted as lost)."""
TASK_EVERY = 5
"""Every fifth long call is made as a task."""
MEAN_STEPS = sum(call.steps for call in MIX) / len(MIX)


@dataclass(frozen=True)
class Phase:
    name: str
    demand: float
    """Offered long-call work as a multiple of the fleet's capacity."""
    seconds: float


@dataclass(frozen=True)
class LongCall:
    arrived: float
    ended: float
    phase: int
    """The phase it arrived in."""
    outcome: str
    """`complete`, `wrong`, `refused` (a JSON-RPC error: a clear answer), `timeout` or `lost` (broke on the way)."""
    requests: int
    """HTTP requests the call took (its rounds), known for a complete one."""
    retry_hint: bool = False
    """A refusal said when to come back (`retryAfterMs` or a `Retry-After`)."""
    hand_backs: tuple[str, ...] = ()
    """Why each round of a complete call that was not the last ended (`admission`, `slice`, ...)."""
    task: bool = False
    """Made as a task: its requests are polls, so it counts apart from the MRTR calls' rounds."""
    detail: str = ""
    """How a refused or broken call ended: the error's kind, code and message."""


def schedule_times(phases: list[Phase], capacity: float, started: float) -> list[tuple[float, int]]:
    """When each long call arrives, and in which phase: evenly spaced at each phase's rate."""
    arrivals: list[tuple[float, int]] = []
    at = started
    for index, phase in enumerate(phases):
        rate = phase.demand * capacity / MEAN_STEPS
        if rate > 0:
            interval = 1.0 / rate
            n = 0
            while n * interval < phase.seconds:
                arrivals.append((at + n * interval, index))
                n += 1
        at += phase.seconds
    return arrivals


async def long_calls(url: str, arrivals: list[tuple[float, int]]) -> list[LongCall]:
    records: list[LongCall] = []
    async with AsyncClient(url, policy=PATIENT) as client:

        async def one(n: int, arrived: float, phase: int) -> None:
            call = MIX[n % len(MIX)]
            task = n % TASK_EVERY == TASK_EVERY - 1
            outcome, requests, hint, detail = "lost", 0, False, ""
            reasons: tuple[str, ...] = ()
            try:
                asked = client.call_tool("count_primes", call.arguments, task=task)
                done = await asyncio.wait_for(asked, DEADLINE_S)
                outcome, requests = ("complete" if call.correct(done) else "wrong"), len(done.trace.hops)
                reasons = tuple(hop.reason for hop in done.trace.hops[:-1])
            except TimeoutError:
                outcome = "timeout"
            except RpcError as exc:
                outcome, hint = "refused", isinstance(exc.data, dict) and "retryAfterMs" in exc.data
                detail = f"{type(exc).__name__} {exc.code}: {exc.message[:80]}"
            except (MrtrError, OSError, ValueError) as exc:
                outcome, detail = "lost", f"{type(exc).__name__}: {str(exc)[:80]}"
            ended = time.monotonic()
            records.append(LongCall(arrived, ended, phase, outcome, requests, hint, reasons, task, detail))

        tasks = []
        for n, (at, phase) in enumerate(arrivals):
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            tasks.append(asyncio.create_task(one(n, at, phase)))
        await asyncio.gather(*tasks)
    return records


def _long_calls_process(url: str, arrivals: list[tuple[float, int]], out: Queue[Any]) -> None:
    out.put(asyncio.run(long_calls(url, arrivals)))


class LongCallsProcess:
    """The long calls in a child process (spawned: a fresh interpreter, none of this one's threads)."""

    def __init__(self, url: str, arrivals: list[tuple[float, int]]) -> None:
        context = multiprocessing.get_context("spawn")
        self._out: Queue[Any] = context.Queue()
        self._child = context.Process(target=_long_calls_process, args=(url, arrivals, self._out))

    def start(self) -> LongCallsProcess:
        self._child.start()
        return self

    def join(self) -> list[LongCall]:
        records: list[LongCall] = self._out.get(True, DEADLINE_S * 3)
        self._child.join()
        return records


async def short_calls(url: str, rate: float, started: float, seconds: float) -> list[Sent]:
    """`echo` calls at `rate` per second from `started` for `seconds`; latency counts from the planned send time."""
    done = await open_loop(url, echo_request, rate=rate, duration=seconds, check=is_complete, starting_at=started)
    return done.sent
