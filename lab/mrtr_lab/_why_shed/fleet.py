"""The cluster the scenarios share, and the three ways an instance leaves it.

One proxy for the whole run; each cell brings up the workers it needs with
the strategy's settings (shedding on, or off), so every cell meets the same
proxy and the same load. Workers leave the way the strategy says:

* checkpoint shedding: the operator's drain (`POST /admin/drain`): every
  call hands its checkpoint back at the next step boundary, then the
  process exits;
* stay where you land: out of the proxy's rotation, then the process waits
  until its calls are done (uvicorn's graceful shutdown, a Kubernetes grace
  period), bounded by the drain timeout, then exits;
* kill and start over: out of rotation, a grace period, then SIGKILL; the
  clients get a 502 and call again from the start (with shedding off there
  is no checkpoint to resume from).

Workers join the same way for every strategy; the proxy then tells the
instances already there (`POST /admin/rebalance`, mrtr_lb's rebalance on
join), which moves their queued calls on with shedding on and changes
nothing with it off. `--no-rebalance` starts the proxy with that off.

The waiting is done from outside, by watching the worker's
`mrtr_worker_in_flight_requests`, so the worker needs no mode of its own:
a draining worker with shedding off still hands its calls back, which is
the behaviour its README documents. A step counter is read once the worker
can run no more steps (idle, or just before the kill), which makes the
lost-work count exact up to the step a kill interrupts.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from enum import Enum

import httpx

from benchmarks._cluster import _children
from mrtr_lab._why_shed.accounting import Sample
from mrtr_ops.local.cluster import LocalCluster, WorkerHandle
from mrtr_ops.metrics_page import MetricsPage
from mrtr_ops.waiting import wait_until
from mrtr_worker.compute.policy import SheddingSettings, environment_name

STEPS = "mrtr_worker_compute_steps_total"
IN_FLIGHT = "mrtr_worker_in_flight_requests"

IDLE_POLL = 0.05
"""Seconds between two looks at a leaving worker (`_wait_idle`): it is stopped at the first look that finds it idle."""


class Strategy(Enum):
    OURS = "checkpoint shedding"
    STAY = "stay where you land"
    KILL = "kill and start over"

    @property
    def worker_env(self) -> dict[str, str]:
        return SheddingSettings(enabled=self is Strategy.OURS).environment()


class Steps:
    """Every worker's step counter, scraped on a thread every `interval` seconds, plus final readings.

    A departed worker's counter leaves with its process, so its final reading (taken by `leave`) is
    kept; `executed` sums the last reading of every instance that ever ran.
    """

    def __init__(self, cluster: LocalCluster, interval: float = 0.25) -> None:
        self._cluster = cluster
        self._interval = interval
        self._http = httpx.Client(timeout=2.0)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started = time.monotonic()
        self.samples: list[Sample] = []
        self.final: dict[str, float] = {}
        self._baseline: dict[str, float] = {}
        """Readings when the cell started: workers reused from an earlier cell bring their counts along."""

    def scrape(self, handle: WorkerHandle) -> tuple[float, float] | None:
        """(steps run, MCP requests in flight) of one worker; None once it is gone."""
        try:
            page = MetricsPage.parse(self._http.get(f"{handle.url}/metrics").text)
        except httpx.HTTPError:
            return None
        return page.value(STEPS, tool="count_primes"), page.value(IN_FLIGHT)

    def sample(self) -> None:
        readings = {}
        for name, handle in list(self._cluster.workers.items()):
            scraped = self.scrape(handle)
            if scraped is not None:
                readings[name] = scraped[0]
        with self._lock:
            self.samples.append(Sample(time.monotonic() - self.started, readings))

    def settle(self, name: str, value: float) -> None:
        with self._lock:
            self.final[name] = value

    def executed(self) -> float:
        """Steps run by every instance so far: final readings of departed ones, a fresh scrape of the rest."""
        self.sample()
        with self._lock:
            last: dict[str, float] = {}
            for sample in self.samples:
                last.update(sample.steps)
            last.update(self.final)
        return sum(value - self._baseline.get(name, 0.0) for name, value in last.items())

    def __enter__(self) -> Steps:
        self.sample()
        self._baseline = dict(self.samples[0].steps)
        self._thread = threading.Thread(target=self._run, name="steps", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._http.close()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.sample()


def add_workers(cluster: LocalCluster, count: int, strategy: Strategy, version: int = 1) -> list[str]:
    """Start `count` workers at once (start-up is mostly imports: they overlap), each in rotation when ready.

    Each join makes the proxy tell the instances that were there (`POST /admin/rebalance`) that capacity
    was added: with shedding on, the calls queued there for a slot move on, and the round robin takes them
    to the new ones; with shedding off (stay where you land) the call changes nothing. Unless the proxy
    runs with `MRTR_LB_REBALANCE_ON_JOIN=false` (`--no-rebalance`).
    """
    with ThreadPoolExecutor(count) as pool:
        handles = list(pool.map(lambda _: cluster.add_worker(version, extra_env=strategy.worker_env), range(count)))
    return [handle.instance_id for handle in handles]


def ensure(cluster: LocalCluster, count: int, strategy: Strategy) -> list[str]:
    """Exactly `count` workers with the strategy's settings: keep those that have them, stop the rest, add more.

    Between cells the workers are idle; reusing them saves start-ups, which dominate a run on a busy machine.
    """
    keep = [name for name, handle in cluster.workers.items() if _settings(handle) == strategy.worker_env]
    for name in [name for name in cluster.workers if name not in keep[:count]]:
        handle = cluster.workers.pop(name)
        cluster.forget_worker(handle)
        _stop(handle)
    missing = count - len(cluster.workers)
    return [*cluster.workers, *(add_workers(cluster, missing, strategy) if missing > 0 else [])][:count]


@dataclass(frozen=True)
class RoundRobin:
    """Where the proxy's round robin stands over a cell's workers as the cell begins (`/lb/backends`).

    With staying where you land, which old worker a restarted call lands on during the upgrade (and so
    whether it must wait for a whole call more before it leaves) turns on it; the fleet model starts there.
    """

    order: tuple[int, ...]
    """The cell's workers (their places in the cell's list) in the order of the proxy's pool; a worker that
    joins later goes after them."""
    next: int | None
    """The one the next request goes to (its place in the cell's list); None under another balance."""


def round_robin(cluster: LocalCluster, names: list[str]) -> RoundRobin | None:
    """The proxy's round robin over `names` now; None if the pool lacks one of them."""
    urls = [cluster.workers[name].lb_url for name in names]
    listing = [entry for entry in cluster.lb.backends() if entry["url"] in urls]
    order = tuple(urls.index(entry["url"]) for entry in listing)
    if sorted(order) != list(range(len(urls))):
        return None
    upcoming = [urls.index(entry["url"]) for entry in listing if entry.get("next")]
    return RoundRobin(order, upcoming[0] if upcoming else None)


def _settings(handle: WorkerHandle) -> dict[str, str]:
    return {k: v for k, v in handle.spec.extra_env if k == environment_name("enabled")}


def leave(cluster: LocalCluster, name: str, strategy: Strategy, steps: Steps, *, grace: float, timeout: float) -> float:
    """Take one worker out the strategy's way; returns the seconds from the start until its process is gone."""
    handle = cluster.workers[name]
    started = time.monotonic()
    cluster.lb.drain(handle.lb_url)
    if strategy is Strategy.OURS:
        httpx.post(f"{handle.url}/admin/drain", headers=cluster.admin_headers, timeout=5.0).raise_for_status()
    idle = _wait_idle(handle, steps, grace if strategy is Strategy.KILL else timeout)
    if strategy is Strategy.KILL or not idle:
        pool = _children(handle.process.pid)
        handle.process.kill()
        _kill(pool)
    else:
        _stop(handle)
    elapsed = time.monotonic() - started
    cluster.workers.pop(name)
    cluster.forget_worker(handle)
    return elapsed


def _wait_idle(handle: WorkerHandle, steps: Steps, seconds: float) -> bool:
    """Wait until the worker handles no MCP request (out of rotation, it then runs no more steps).

    Every scrape settles the worker's step count, so the last one before it idles, exits or is killed
    stands as its final reading (a worker that exits between two scrapes 50 ms apart may have run a step
    more than counted: the lost-work figure errs low by at most that step per slot).
    """

    def idle() -> bool:
        scraped = steps.scrape(handle)
        if scraped is None:
            return not handle.process.running  # gone (a drained worker exits once idle), or just slow to answer
        steps.settle(handle.instance_id, scraped[0])
        return scraped[1] == 0

    try:
        wait_until(idle, timeout=seconds, interval=IDLE_POLL, what=f"{handle.instance_id} idle")
    except TimeoutError:
        return False
    return True


def _stop(handle: WorkerHandle) -> None:
    pool = _children(handle.process.pid)
    handle.process.stop()
    _kill(pool)


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
