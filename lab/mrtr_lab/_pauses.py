"""Pauses like a long garbage collection, on real worker processes: SIGSTOP for a while, then SIGCONT.

Why: the fleet simulator's `gc` scenario (every instance pauses 2 s about every 30 s) is where hand-back
lost to hedging; a pause stalls the slices under way, which read as slowness to the worker's standing
(`mrtr_worker.compute.standing`). This puts the same pauses on a real cluster, so the pause benchmark
measures what the model says. The pause moments come from a seeded generator, so every setup of one run
meets the same schedule; a worker's step processes are stopped with it, as a stop of its container would.
"""

from __future__ import annotations

import heapq
import os
import random
import signal
import threading
import time
from collections.abc import Sequence
from contextlib import suppress

from benchmarks._cluster import _children, _signal


def schedule(workers: int, every: float, length: float, until: float, seed: int) -> list[tuple[float, int]]:
    """(start, worker) of every pause in [0, `until`): each worker's pauses `every` s apart on average
    (exponential gaps, counted from the end of the one before), `length` s long, in order of start."""
    rng = random.Random(seed)
    pauses: list[tuple[float, int]] = []
    for worker in range(workers):
        at = rng.expovariate(1 / every)
        while at < until:
            pauses.append((at, worker))
            at += length + rng.expovariate(1 / every)
    return sorted(pauses)


class Pauses:
    """A thread that pauses the processes `pids` (each with its children) on `schedule`'s pauses.

    Used as a context manager around the load; on exit every paused process is resumed. `stopped` is the
    number of pauses that began, `stopped_seconds` how long processes were stopped in all (measured)."""

    def __init__(self, pids: Sequence[int], *, every: float, length: float, until: float, seed: int) -> None:
        self._pids = list(pids)
        self._length = length
        self._plan = schedule(len(pids), every, length, until, seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pauses", daemon=True)
        self.stopped = 0
        self.stopped_seconds = 0.0

    def __enter__(self) -> Pauses:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), -10)  # a busy machine delays signals less
        started = time.monotonic()
        events = [(at, 1, worker) for at, worker in self._plan]  # 1: a stop; 0: a resume (first at a tie)
        heapq.heapify(events)
        held: dict[int, tuple[list[int], float]] = {}
        try:
            while events and not self._stop.wait(max(0.0, started + events[0][0] - time.monotonic())):
                at, stop, worker = heapq.heappop(events)
                if stop:
                    if worker in held:  # still paused (a late resume): this pause folds into that one
                        continue
                    pids = [self._pids[worker], *_children(self._pids[worker])]
                    _signal(pids, signal.SIGSTOP)
                    held[worker] = (pids, time.monotonic())
                    self.stopped += 1
                    heapq.heappush(events, (at + self._length, 0, worker))
                elif worker in held:
                    self._resume(held.pop(worker))
        finally:
            for paused in held.values():
                self._resume(paused)

    def _resume(self, paused: tuple[list[int], float]) -> None:
        pids, since = paused
        _signal(pids, signal.SIGCONT)
        self.stopped_seconds += time.monotonic() - since
