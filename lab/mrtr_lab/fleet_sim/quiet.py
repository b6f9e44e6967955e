"""A step's CPU on a quiet machine: the reference figures' conditions, when the parameters were measured under load.

The reference cells (the why-shed and straggler tables of the report) ran on
a quiet machine (others ~1 % of the CPU); `calibrate.py` may have to measure
the step times while other work fills the machine, and a step's CPU time
then grows (the sieve shares caches with everything else: 55 ms under a load
average of 22 against about 45 ms quiet). A fixed factor would be a fit;
this is a measurement carried over instead. The report's cluster-efficiency
section ran a bare pool of two processes stepping `MIX` (no HTTP, nothing
else) on a quiet machine, which gives a quiet mix step in milliseconds; the
ratio of the why-shed step to that mix is measured here, both in the same
processes at the same moment, so whatever the load does to one it does to
the other. Their product is the quiet why-shed step (two stepping at once);
the model scales every step time by quiet / measured (`Model.from_calibration`).
"""

from __future__ import annotations

import multiprocessing
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._cluster import MIX, PrimesCall
from benchmarks.report import read_figures, tables
from mrtr_worker.compute import primes

SECTION = "cluster-efficiency"
BARE_ROW = "bare process pool (2 processes)"
BARE_PROCESSES = 2


@dataclass
class QuietStep:
    mean: float
    """CPU seconds of a step of the short call with two stepping at once, on a quiet machine."""
    bare_mix: float
    """The report's bare pool: CPU seconds per `MIX` step (its cores, less its driver's CPU, over its steps)."""
    ratio: float
    """The short call's step over the mix's, measured together (the mix weighted as the bare pool runs it)."""
    source: str
    long_mean: float = 0.0
    """The same for the long call (the upgrade's): its step is dearer (more base primes to sieve with)."""
    long_ratio: float = 0.0


def bare_mix_step(report: Path) -> tuple[float, str]:
    """(CPU seconds per mix step, where from): the bare pool's steps/s of the cluster-efficiency figures of
    `report` (their JSON), its two cores less what its driver (in the same two cores) used in the window."""
    figures = read_figures(SECTION, report)
    found = [(prose, table) for prose, table in tables(figures) if table["rows"] and "in a " in prose]
    rows = [row for _, table in found for row in table["rows"] if row[0] == BARE_ROW]
    window = re.search(r"in a ([\d.]+) s window", found[0][0]) if found else None
    driver = re.fullmatch(r"([\d.]+) / -", rows[0][-1]) if rows else None
    if window is None or driver is None:
        raise LookupError(f"the {SECTION} figures of {report} have no bare-pool row")
    rate, seconds = float(rows[0][1]), float(window.group(1))
    cores = BARE_PROCESSES - float(driver.group(1)) / seconds
    return cores / rate, f"{SECTION}, {figures['measured']} ({rate:g} steps/s, driver {driver.group(1)} s)"


LONG_SAMPLE = 40
"""Steps of the long call timed per round, spread over its range (its 400 steps would take the minutes)."""


def ratios(short: PrimesCall, long: PrimesCall, rounds: int = 3) -> tuple[float, float]:
    """The short and long calls' mean steps over the mix's, in two processes stepping at once (as the bare pool)."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [
        context.Process(target=_ratios_in_process, args=(short.arguments, long.arguments, rounds, results), daemon=True)
        for _ in range(BARE_PROCESSES)
    ]
    for process in processes:
        process.start()
    found = [results.get(timeout=1800) for _ in processes]
    for process in processes:
        process.join()
    return statistics.fmean(f[0] for f in found), statistics.fmean(f[1] for f in found)


def _ratios_in_process(short: dict[str, Any], long: dict[str, Any], rounds: int, results: Any) -> None:
    """Short, long and mix steps interleaved round by round, so a change of load hits all alike. The bare
    pool's callers each keep one limit of the mix and step in turn, so each limit runs a third of the steps."""
    found = []
    for _ in range(rounds):
        mix = statistics.fmean(_mean_step(call.arguments) for call in MIX)
        found.append((_mean_step(short) / mix, _mean_step(long, LONG_SAMPLE) / mix))
    results.put((statistics.fmean(f[0] for f in found), statistics.fmean(f[1] for f in found)))


def _mean_step(arguments: dict[str, Any], sample: int | None = None) -> float:
    state = primes.initial(arguments)
    primes.step(state)  # the base primes, once, as a step process has them
    total = primes.total_steps(state)
    count = total if sample is None else min(sample, total)
    times = []
    for i in range(count):
        started = time.process_time()
        primes.step({**state, "next": 2 + (total * i // count) * state["segment"]})
        times.append(time.process_time() - started)
    return statistics.fmean(times)


def quiet_step(short: PrimesCall, long: PrimesCall, report: Path) -> QuietStep:
    bare, source = bare_mix_step(report)
    short_ratio, long_ratio = ratios(short, long)
    return QuietStep(bare * short_ratio, bare, short_ratio, source, bare * long_ratio, long_ratio)
