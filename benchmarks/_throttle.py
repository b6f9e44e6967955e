"""One instance at a quarter of its speed: a SIGSTOP/SIGCONT duty cycle, as a noisy neighbour or a throttled container.

Shared by the lab's straggler, why-shed and balance studies and by the worker's own straggler tests, which is
why it lives beside the cluster helpers rather than in a study.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from contextlib import suppress

from benchmarks._cluster import _children, _signal

THROTTLE_PERIOD = 0.1
THROTTLE_RUNNING = 0.25
"""The slow instance runs 25 ms in every 100 ms: a quarter of its speed."""


class Throttle:
    """SIGSTOP/SIGCONT a process and its children on a fixed duty cycle, from a thread of this process.

    Toggle times are computed from the start, so a late wake-up does not drift the cycle. The thread asks
    for a higher CPU priority (where allowed) so that a busy machine delays its signals less; the share of
    time the processes were really stopped is measured and reported.
    """

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._stop = threading.Event()
        self._stopped = 0.0
        self._elapsed = 0.0
        self._thread = threading.Thread(target=self._run, name="throttle", daemon=True)

    def __enter__(self) -> Throttle:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def stopped_share(self) -> float:
        return self._stopped / self._elapsed if self._elapsed else 0.0

    def _run(self) -> None:
        with suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), -10)
        started = time.monotonic()
        pids: list[int] = []
        try:
            for cycle in itertools.count():
                if self._stop.is_set():
                    break
                base = started + cycle * THROTTLE_PERIOD
                _sleep_until(base + THROTTLE_RUNNING * THROTTLE_PERIOD)
                pids = [self._pid, *_children(self._pid)]
                _signal(pids, signal.SIGSTOP)
                paused = time.monotonic()
                _sleep_until(base + THROTTLE_PERIOD)
                _signal(pids, signal.SIGCONT)
                self._stopped += time.monotonic() - paused
        finally:
            _signal(pids, signal.SIGCONT)
            self._elapsed = time.monotonic() - started


def _sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.monotonic()))
