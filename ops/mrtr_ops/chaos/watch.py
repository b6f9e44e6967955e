"""What the chaos run observes while it works: the proxy's view of the workers, and the workers' own counters.

`lb_errors` reads the proxy's `/lb/metrics` (through `LbAdmin`, which also
tells whether a victim left and rejoined the rotation): how the proxy's
attempts on each backend ended.
`HandBackMeter` scrapes every worker's `/metrics` in the background and adds
up the hand-backs (`mrtr_worker_input_required_total` by reason) across
restarts: a killed worker's counters die with it, so what each process
counted is kept under its process id, and a restarted worker starts a new
account. What the processes had counted before the run (a compose cluster
that served earlier traffic) is the baseline, taken when the meter starts.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import httpx

from mrtr_ops.fleet import FleetWorker, metrics
from mrtr_ops.lb_admin import LbAdmin
from mrtr_protocol.rounds import HAND_BACK_REASONS

if TYPE_CHECKING:
    from mrtr_ops.chaos.fleet import ChaosFleet

LB_ERROR_KINDS = ("connect", "upstream", "unresponsive")


def metric_total(worker: FleetWorker, name: str, timeout: float = 2.0) -> float | None:
    """The sum of one worker's samples called `name` (None if the worker did not answer)."""
    try:
        return metrics(worker, timeout).value(name)
    except httpx.HTTPError:
        return None


def lb_errors(lb: LbAdmin) -> dict[str, dict[str, float]]:
    """The proxy's failed attempts so far, per backend URL and kind (they outlive a removal from the pool)."""
    found: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(LB_ERROR_KINDS, 0.0))
    for labels, value in lb.metrics().matching("mrtr_lb_backend_errors_total"):
        named = dict(labels)
        if named.get("kind") in LB_ERROR_KINDS:
            found[named["backend"]][named["kind"]] = value
    return found


class HandBackMeter:
    """Background scrapes of every worker's hand-back counters, summed over the run and across restarts."""

    def __init__(self, fleet: ChaosFleet, interval: float = 0.5) -> None:
        self._fleet = fleet
        self._interval = interval
        self._lock = threading.Lock()
        self._last: dict[tuple[str, int, str], float] = {}
        """(instance, process id, reason) -> the last value that process reported."""
        self._baseline: dict[tuple[str, int, str], float] = {}
        """What the processes running when the meter started had counted before."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hand-back meter", daemon=True)
        self.scrapes = 0

    def start(self) -> HandBackMeter:
        self.scrape_now()
        with self._lock:
            self._baseline = dict(self._last)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.scrape_now()

    def scrape_now(self, only: str | None = None) -> None:
        """Scrape every worker (or one) at once: before a fault, so what it counted is kept."""
        try:
            workers = self._fleet.workers()
        except Exception:  # the fleet is mid-change; the next scrape will see it
            return
        for worker in workers:
            if only is None or worker.instance_id == only:
                pid = self._pid(worker.instance_id)
                if pid is not None:
                    self._scrape(worker, pid)

    def _pid(self, instance_id: str) -> int | None:
        try:
            return self._fleet.process_id(instance_id)
        except Exception:  # gone between the listing and now (a drained container, a removed worker)
            return None

    @contextmanager
    def following(self, instance_id: str, interval: float = 0.02) -> Iterator[None]:
        """Scrape one worker as often as possible while the block runs: a draining worker counts its last
        hand-backs just before it exits, between two ordinary scrapes."""
        worker = next((w for w in self._fleet.workers() if w.instance_id == instance_id), None)
        pid = self._fleet.process_id(instance_id)
        done = threading.Event()

        def follow() -> None:
            while worker is not None and pid is not None and not done.wait(interval):
                self._scrape(worker, pid)

        thread = threading.Thread(target=follow, name=f"follow {instance_id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join(5)

    def totals(self) -> dict[str, int]:
        with self._lock:
            summed: dict[str, float] = defaultdict(float)
            for key, value in self._last.items():
                summed[key[2]] += value - self._baseline.get(key, 0.0)
        return {reason.value: int(summed.get(reason, 0)) for reason in HAND_BACK_REASONS}

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.scrape_now()

    def _scrape(self, worker: FleetWorker, pid: int) -> None:
        try:
            page = metrics(worker, timeout=1.0)
        except httpx.HTTPError:  # paused, cut off, gone: nothing new to count from it
            return
        counts = page.by_label("mrtr_worker_input_required_total", "reason")
        with self._lock:
            self.scrapes += 1
            for reason in HAND_BACK_REASONS:
                self._last[(worker.instance_id, pid, reason.value)] = counts.get(reason.value, 0.0)
