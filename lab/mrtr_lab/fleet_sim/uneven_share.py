"""How unevenly the kernel shares the cores among equal step processes: the spread the model's step pools get.

Three long calls on the real cluster's three workers are three step
processes on two cores. CFS keeps a run queue per core and moves tasks
between them from time to time, so for a while one process has a core to
itself and two share the other; over a whole call the shares even out, but
not entirely (the first calls of a rolling upgrade end seconds apart, though
they start together and do the same work). The model shares by weight and
evenly, so without this its equal calls are more alike than the real ones.

Measured on the real cluster, as the upgrade's first calls run: three
workers, shedding off, one long call each through the proxy, the three
step processes' CPU time read from /proc every 0.1 s for `seconds` (a few
trials); for windows of 1.25 to 20 s, the spread (standard deviation over
mean across the processes) of the CPU each got. Three such processes alone
on the machine spread less and vary more from run to run (2026-12-02: 0.06,
0.013 and 0.015 over 20 s windows): the workers' event loops, the proxy and
the client move the kernel's balance too. The model draws each step
pool's CFS weight afresh every `period` seconds (lognormal, mean 1, `spread`):
`fit` finds the period and spread whose averages over those windows spread
as the measured ones did.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field

from benchmarks._cluster import PrimesCall, _children
from benchmarks._load import cpu_seconds
from mrtr_lab._why_shed.fleet import Strategy, ensure
from mrtr_lab._why_shed.scenarios import Callers
from mrtr_ops.local.cluster import LocalCluster
from mrtr_ops.waiting import wait_until
from mrtr_worker.compute.pool_process import STEP_NICENESS

WINDOWS = (1.25, 2.5, 5.0, 10.0, 20.0)
"""Window lengths, seconds, over which the shares are compared."""
PERIODS = tuple(round(0.25 * k, 2) for k in range(1, 81))
"""Candidate periods of the model's draws, 0.25 to 20 s."""
SAMPLE_EVERY = 0.1
PROCESSES = 3
"""Workers, one long call each: the rolling upgrade's first calls."""
_PHASES = 200
"""Phases of a window against the draws' period that `window_factor` averages over."""


@dataclass
class UnevenShare:
    spread: float
    """Standard deviation over mean of a step pool's weight factor (one draw)."""
    period: float
    """Seconds one draw lasts."""
    measured: dict[str, float] = field(default_factory=dict)
    """The measured spread across the processes by window length (seconds, as text: JSON keys)."""
    processes: int = 3


def uneven_share(cluster: LocalCluster, call: PrimesCall, seconds: float = 40.0, trials: int = 2) -> UnevenShare:
    """One call of `call` on each of the cluster's workers (shedding off: each stays where it lands), their step
    processes' CPU sampled for `seconds` from the moment all step, `trials` times; the model's draws fitted."""
    ensure(cluster, PROCESSES, Strategy.STAY)
    spreads: dict[float, list[float]] = {w: [] for w in WINDOWS}
    for _ in range(trials):
        with Callers(cluster.mcp_url, call, PROCESSES):
            pids = wait_until(
                lambda: stepping(cluster), timeout=300, interval=SAMPLE_EVERY, what="a call stepping on every worker"
            )
            samples: list[tuple[float, list[float]]] = []
            started = time.monotonic()
            while not samples or samples[-1][0] < seconds:  # the last sample at `seconds` or just after
                samples.append((time.monotonic() - started, [cpu_or_zero(pid) for pid in pids]))
                time.sleep(SAMPLE_EVERY)
        # Leaving the block lets the calls in flight finish: the next trial starts on idle workers.
        for window, found in spreads.items():
            if (value := window_spread(samples, window)) is not None:
                found.append(value)
    measured = {f"{w:g}": statistics.fmean(v) for w, v in spreads.items() if v}
    spread, period = fit({float(k): v for k, v in measured.items()}, PROCESSES)
    return UnevenShare(spread, period, measured, PROCESSES)


def stepping(cluster: LocalCluster) -> list[int] | None:
    """The step process running a call on each worker (the one of its pool using CPU), once every worker has one.

    The pool's processes are the worker's children reniced by `STEP_NICENESS` (relative to the worker's own
    level: under `nice -n 10` they run at 19)."""
    found = []
    for handle in cluster.workers.values():
        own = _nice(handle.process.pid)
        pool = [pid for pid in _children(handle.process.pid) if own is not None and _nice(pid) == _stepping_nice(own)]
        before = {pid: cpu_or_zero(pid) for pid in pool}
        time.sleep(0.3)
        busy = [pid for pid in pool if cpu_or_zero(pid) > before[pid]]
        if len(busy) != 1:
            return None
        found.extend(busy)
    return found


def _stepping_nice(worker: int) -> int:
    return min(worker + STEP_NICENESS, 19)  # the kernel's highest nice level


def _nice(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[16])
    except OSError:
        return None


def cpu_or_zero(pid: int) -> float:
    """`cpu_seconds`, 0 once the process is gone."""
    try:
        return cpu_seconds(pid)
    except OSError:
        return 0.0


def window_spread(samples: list[tuple[float, list[float]]], window: float) -> float | None:
    """The mean, over back-to-back windows of `window` s, of the spread across processes of the CPU each got."""
    spreads = []
    start = 0
    for index, (at, _) in enumerate(samples):
        if at - samples[start][0] >= window - SAMPLE_EVERY / 2:
            got = [b - a for a, b in zip(samples[start][1], samples[index][1], strict=True)]
            mean = statistics.fmean(got)
            if mean > 0:
                spreads.append(statistics.pstdev(got) / mean)
            start = index
    return statistics.fmean(spreads) if spreads else None


def window_factor(period: float, window: float) -> float:
    """How much of a draw's spread is left in the average over a window: sqrt of the sum of the squared shares
    of the window each draw covers, averaged over the window's phase against the draws."""
    total = 0.0
    for k in range(_PHASES):
        offset = period * k / _PHASES  # where in a draw's period the window begins
        pieces, covered = [], 0.0
        first = min(window, period - offset)
        pieces.append(first)
        covered = first
        while covered < window - 1e-12:
            piece = min(period, window - covered)
            pieces.append(piece)
            covered += piece
        total += sum((piece / window) ** 2 for piece in pieces)
    return math.sqrt(total / _PHASES)


def fit(measured: dict[float, float], processes: int = 3) -> tuple[float, float]:
    """(spread, period) of the draws whose window averages spread nearest `measured` (least squares of the logs).

    `measured` holds spreads across `processes` processes: a few draws' spread about their own mean is smaller
    than the draws' spread (`small_sample`), so the fitted level is divided by it."""
    usable = {w: v for w, v in measured.items() if v > 0}
    if not usable:
        return 0.0, PERIODS[-1]
    best: tuple[float, float, float] | None = None
    for period in PERIODS:
        logs = {w: math.log(v) - math.log(window_factor(period, w)) for w, v in usable.items()}
        level = statistics.fmean(logs.values())
        error = sum((value - level) ** 2 for value in logs.values())
        if best is None or error < best[0] - 1e-12:
            best = (error, math.exp(level), period)
    assert best is not None
    return best[1] / small_sample(processes), best[2]


def small_sample(count: int) -> float:
    """The expected spread about their own mean of `count` normal draws, over the draws' spread (the population
    standard deviation's bias: sqrt((n-1)/n) times c4(n))."""
    if count < 2:
        return 1.0
    c4 = math.sqrt(2 / (count - 1)) * math.exp(math.lgamma(count / 2) - math.lgamma((count - 1) / 2))
    return math.sqrt((count - 1) / count) * c4
