"""The three scenarios, each run once per strategy on the shared proxy with fresh workers.

(a) one instance at a quarter speed (the straggler benchmark's duty cycle);
(b) a rolling upgrade of every instance (a v2 worker joins, then an old one
leaves the strategy's way, one at a time) while long calls run; (c) a
scale-out from two instances to four in the middle of an overload.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

from benchmarks._cluster import PrimesCall
from benchmarks._throttle import Throttle
from mrtr_lab._why_shed.accounting import lost_steps, seconds_to_share
from mrtr_lab._why_shed.fleet import RoundRobin, Steps, Strategy, add_workers, ensure, leave, round_robin
from mrtr_lab._why_shed.load import Load, closed_loop
from mrtr_ops.local.cluster import LocalCluster
from mrtr_ops.percentiles import percentile
from mrtr_ops.waiting import wait_until

SCENARIOS = {
    "a": "one instance at a quarter speed",
    "b": "rolling upgrade of every instance",
    "c": "scale-out from 2 to 4 instances",
}


@dataclass(frozen=True)
class Sizes:
    """How big each scenario is: the flags of `why_shed.py`."""

    duration: float
    """Seconds of load in (a), and in (c) after the scale-out."""
    short: PrimesCall
    """The call of (a) and (c)."""
    long: PrimesCall
    """The long call of (b)."""
    callers: int
    overload: int
    """Callers in (c): more than two instances' slots."""
    warmup: float
    """Seconds of load before the scale-out in (c)."""
    grace: float
    """Kill and start over: seconds a leaving instance gets before SIGKILL."""
    drain_timeout: float
    """Stay where you land: how long a leaving instance may wait for its calls."""
    upgrade_window: float = 0.0
    """(b): seconds of load from the upgrade's start, the same for every strategy (longer only while the
    upgrade itself, or a call in flight at its start, lasts longer), so that calls completed compare."""
    long_callers: int = 3
    """Callers in (b): one call in flight per instance when the upgrade starts."""
    rebalance: bool = True
    """(c): the old instances are told of the new ones (`POST /admin/rebalance`)."""


@dataclass
class Cell:
    """One strategy in one scenario."""

    scenario: str
    strategy: Strategy
    load: Load
    steps_per_call: int
    executed: float
    upgrade_seconds: float | None = None
    """(b): from the first replacement's start to the last old instance gone."""
    leaving_seconds: float | None = None
    """(b): the part of it the old instances took to leave (the rest is starting the new ones, alike for all)."""
    share_seconds: float | None = None
    added_at: float | None = None
    """(c): `time.monotonic()` when both new instances were in rotation."""
    stopped_share: float | None = None
    round_robin: RoundRobin | None = None
    """The proxy's round robin over the cell's first workers as its load began."""

    def p(self, q: int) -> float:
        """The `q`-th percentile of the latency of every call that returned (seconds)."""
        return percentile([call.seconds for call in self.load.calls], q)

    @property
    def lost(self) -> float:
        return lost_steps(self.executed, self.load.completed, self.steps_per_call)


class Callers:
    """The closed loop on its own thread and event loop, so the scenario drives the cluster synchronously."""

    def __init__(self, url: str, call: PrimesCall, callers: int) -> None:
        self.load = Load()
        self._args = (url, call, callers)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="callers", daemon=True)

    def __enter__(self) -> Callers:
        self._thread.start()
        self._ready.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop starting calls; the calls in flight finish."""
        assert self._loop is not None
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join()

    def _run(self) -> None:
        async def main() -> None:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            self._ready.set()
            await closed_loop(*self._args, self._stop, self.load)

        asyncio.run(main())


def trace(cell: Cell, slowest: int) -> list[str]:
    """A cell's `slowest` calls, each with when it started (s into the cell) and its exchanges."""
    calls = cell.load.calls
    first = min((call.started for call in calls), default=0.0)
    lines = [f"({cell.scenario}) {cell.strategy.value}: the {slowest} slowest calls (instance:reason:ms per hop)"]
    for call in sorted(calls, key=lambda c: -c.seconds)[:slowest]:
        lines.append(f"  {call.seconds:5.2f} s, started at {call.started - first:5.1f} s: {' '.join(call.hops)}")
    return lines


def run(cluster: LocalCluster, scenario: str, strategy: Strategy, sizes: Sizes) -> Cell:
    """One cell, on workers with the strategy's settings (idle ones of an earlier cell are reused)."""
    return {"a": _slow_instance, "b": _rolling_upgrade, "c": _scale_out}[scenario](cluster, strategy, sizes)


def _slow_instance(cluster: LocalCluster, strategy: Strategy, sizes: Sizes) -> Cell:
    workers = ensure(cluster, 3, strategy)
    turned = round_robin(cluster, workers)
    with Steps(cluster) as steps, Throttle(cluster.workers[workers[0]].process.pid) as throttle:
        with Callers(cluster.mcp_url, sizes.short, sizes.callers) as callers:
            time.sleep(sizes.duration)  # the load runs for a fixed window: nothing to wait for
        executed = steps.executed()
    cell = Cell("a", strategy, callers.load, sizes.short.steps, executed, round_robin=turned)
    cell.stopped_share = throttle.stopped_share
    return cell


def _rolling_upgrade(cluster: LocalCluster, strategy: Strategy, sizes: Sizes) -> Cell:
    old = ensure(cluster, 3, strategy)
    turned = round_robin(cluster, old)
    leaving = 0.0
    with Steps(cluster) as steps:
        with Callers(cluster.mcp_url, sizes.long, sizes.long_callers) as callers:
            _busy(cluster, steps, old, min(len(old), sizes.long_callers))
            started = time.monotonic()
            caught = callers.load.in_flight()  # the calls the upgrade catches: the window waits for all of them
            for name in old:
                add_workers(cluster, 1, strategy, version=2)
                leaving += leave(cluster, name, strategy, steps, grace=sizes.grace, timeout=sizes.drain_timeout)
            upgrade = time.monotonic() - started
            # The same window for every strategy, longer only while the upgrade or a caught call lasts longer.
            time.sleep(max(0.0, sizes.upgrade_window - upgrade))
            wait_until(
                lambda: not caught & callers.load.in_flight(),
                timeout=sizes.drain_timeout,
                interval=0.2,
                what="the calls in flight when the upgrade started",
            )
        executed = steps.executed()
    cell = Cell("b", strategy, callers.load, sizes.long.steps, executed, upgrade_seconds=upgrade, round_robin=turned)
    cell.leaving_seconds = leaving
    return cell


def _scale_out(cluster: LocalCluster, strategy: Strategy, sizes: Sizes) -> Cell:
    turned = round_robin(cluster, ensure(cluster, 2, strategy))
    with Steps(cluster) as steps:
        with Callers(cluster.mcp_url, sizes.short, sizes.overload) as callers:
            time.sleep(sizes.warmup)  # an overload under way before the new instances come
            new = add_workers(cluster, 2, strategy)
            added_at = time.monotonic()
            time.sleep(sizes.duration)
        executed = steps.executed()
        share = seconds_to_share(steps.samples, new, added_at - steps.started, fair_share=2 / 4)
    return Cell(
        "c",
        strategy,
        callers.load,
        sizes.short.steps,
        executed,
        share_seconds=share,
        added_at=added_at,
        round_robin=turned,
    )


def _busy(cluster: LocalCluster, steps: Steps, names: list[str], count: int) -> None:
    """The upgrade starts once `count` old instances have a call in flight (else there is nothing to wait for)."""

    def busy() -> bool:
        return sum((steps.scrape(cluster.workers[name]) or (0.0, 0.0))[1] > 0 for name in names) >= count

    wait_until(busy, timeout=300, interval=0.1, what=f"calls in flight on {count} instances")
