"""How much more CPU a worker's step process gets while the benchmark reads that worker's page every 50 ms.

In why-shed's rolling upgrade the benchmark waits for a leaving worker to
go idle by reading its /metrics page every 50 ms (`_wait_idle`), on top of
reading every worker's page every 0.25 s (`Steps`). Each read wakes the
worker's event loop, and the kernel's balancing of its run queues then
favours that worker's step process: in every traced real upgrade the first
leaving worker's call ended first, 3 to 8 s ahead of the other two
(2026-12-01 and -02), which decides where the calls restarted meanwhile
land. Equal calls with nobody polled end within a second or two of each
other (`uneven_share.py`).

Measured as the upgrade's first calls run: three workers, shedding off, one
long call each through the proxy, every page read every 0.25 s and one
worker's also every 50 ms; the step processes' CPU over `seconds`. Each
trial polls another worker (the lift is the polled one's CPU over the mean
of the other two, less one), so a worker's own luck does not pass for the
poll's. The model multiplies a step pool's claim on the cores by one plus
the lift while its worker is polled so.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field

from benchmarks._cluster import PrimesCall
from mrtr_lab._why_shed.fleet import IDLE_POLL, Steps, Strategy, ensure
from mrtr_lab._why_shed.scenarios import Callers
from mrtr_lab.fleet_sim.uneven_share import PROCESSES, SAMPLE_EVERY, cpu_or_zero, stepping
from mrtr_ops.local.cluster import LocalCluster, WorkerHandle
from mrtr_ops.waiting import wait_until


@dataclass
class PolledLift:
    lift: float
    """The polled worker's step process's CPU over the mean of the others', less one (mean of the trials)."""
    trials: list[float] = field(default_factory=list)
    """Each trial's lift, the polled worker taken in turn."""
    seconds: float = 0.0
    """Length of each trial."""


def polled_lift(cluster: LocalCluster, call: PrimesCall, seconds: float = 40.0, trials: int = 3) -> PolledLift:
    """One call of `call` on each of the cluster's workers, every page read as why-shed reads them, one worker's
    page also every `IDLE_POLL` s; the step processes' CPU over `seconds`, `trials` times (another worker polled
    each time)."""
    names = ensure(cluster, PROCESSES, Strategy.STAY)
    lifts = []
    for trial in range(trials):
        polled = names[trial % len(names)]
        with Steps(cluster) as steps, Callers(cluster.mcp_url, call, PROCESSES):
            pids = wait_until(
                lambda: stepping(cluster), timeout=300, interval=SAMPLE_EVERY, what="a call stepping on every worker"
            )
            handles = list(cluster.workers.values())
            with _Polling(steps, cluster.workers[polled]):
                before = [cpu_or_zero(pid) for pid in pids]
                time.sleep(seconds)  # the measurement's length, not a wait for an event
                got = [cpu_or_zero(pid) - b for pid, b in zip(pids, before, strict=True)]
            # Leaving the block lets the calls in flight finish: the next trial starts on idle workers.
        mine = got[[h.instance_id for h in handles].index(polled)]
        others = [g for g, h in zip(got, handles, strict=True) if h.instance_id != polled]
        lifts.append(mine / statistics.fmean(others) - 1)
    return PolledLift(statistics.fmean(lifts), lifts, seconds)


class _Polling:
    """`_wait_idle`'s reads of one worker's page, every `IDLE_POLL` s on a thread, while the block runs."""

    def __init__(self, steps: Steps, handle: WorkerHandle) -> None:
        self._steps = steps
        self._handle = handle
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="polling", daemon=True)

    def __enter__(self) -> _Polling:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(IDLE_POLL):
            self._steps.scrape(self._handle)
