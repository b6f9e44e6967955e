"""The spike's figures, from one setup's records: per phase, and per second for the timeline.

Definitions (docs/benchmarks.md repeats them beside the table):
* goodput: computation steps the workers ran per second (their own counters), over the fleet's
  capacity measured in the same run; with MRTR no step is run twice, so every step is useful unless
  its call was then lost (counted apart).
* settled: the first one-second bin, counted from a step of demand (up or down), whose short-call
  p99 is within `SETTLED_FACTOR` x the first steady phase's p99; the figure is that bin's end.
* requests per completed call: HTTP requests (rounds) of the long MRTR calls that completed, by the
  phase they arrived in (a task's requests are its polls, so tasks count apart: how many completed).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks._load import Sent
from benchmarks._spike_load import LongCall, Phase
from mrtr_ops.percentiles import percentile

SETTLED_FACTOR = 2.0
LOST_OUTCOMES = ("wrong", "timeout", "lost")


@dataclass(frozen=True)
class Sample:
    at: float
    steps: float
    """The workers' step counters summed, at `at` (`time.monotonic()`)."""


@dataclass(frozen=True)
class PhaseFigures:
    phase: Phase
    goodput: float
    """Steps per second over capacity."""
    p50: float
    p99: float
    p999: float
    short_errors: int
    arrived: int
    completed: int
    refused: int
    refused_with_hint: int
    lost: int
    """Calls that ended wrong, past their deadline or broken: their steps were spent for nothing."""
    wrong: int
    requests_per_call: float
    hand_backs: dict[str, float]
    """Hand-backs per completed MRTR call, by reason."""
    tasks_arrived: int = 0
    tasks_completed: int = 0
    settle_up_s: float | None = None
    settle_down_s: float | None = None


def p999(values: Sequence[float]) -> float:
    """The 99.9th percentile by `mrtr_ops.percentiles`' rule (`statistics.quantiles`, inclusive); NaN if none."""
    if len(values) < 2:
        return float(values[0]) if values else math.nan
    return statistics.quantiles(values, n=1000, method="inclusive")[998]


def starts(phases: Sequence[Phase], started: float) -> list[float]:
    """Each phase's start on the shared clock, and the schedule's end last."""
    edges = [started]
    for phase in phases:
        edges.append(edges[-1] + phase.seconds)
    return edges


def step_rates(samples: Sequence[Sample]) -> list[tuple[float, float]]:
    """(middle of the interval, steps per second) between consecutive samples."""
    return [
        ((a.at + b.at) / 2, (b.steps - a.steps) / (b.at - a.at)) for a, b in itertools.pairwise(samples) if b.at > a.at
    ]


def p99_by_second(short: Sequence[Sent], started: float, seconds: int) -> list[float]:
    """Short-call p99 per one-second bin of planned send time (NaN for an empty bin)."""
    bins: list[list[float]] = [[] for _ in range(seconds)]
    for call in short:
        index = int(call.planned - started)
        if 0 <= index < seconds:
            bins[index].append(call.latency_ms if call.ok else math.inf)
    return [percentile(values, 99) if values else math.nan for values in bins]


def settle_time(p99s: Sequence[float], step_at: int, threshold: float) -> float | None:
    """Seconds from the step to the end of the first bin at or after it whose p99 is within `threshold`."""
    for index in range(max(0, step_at), len(p99s)):
        if p99s[index] <= threshold:
            return float(index - step_at + 1)
    return None


def phase_figures(
    phases: Sequence[Phase],
    started: float,
    capacity: float,
    samples: Sequence[Sample],
    short: Sequence[Sent],
    long: Sequence[LongCall],
) -> list[PhaseFigures]:
    edges = starts(phases, started)
    rates = step_rates(samples)
    p99s = p99_by_second(short, started, math.ceil(edges[-1] - started))
    figures: list[PhaseFigures] = []
    steady_p99 = math.nan
    for index, phase in enumerate(phases):
        low, high = edges[index], edges[index + 1]
        in_phase = [rate for at, rate in rates if low <= at < high]
        latencies = [c.latency_ms for c in short if low <= c.planned < high and c.ok]
        arrived = [c for c in long if c.phase == index]
        completed = [c for c in arrived if c.outcome == "complete"]
        rounds = [c for c in completed if not c.task]  # a task's requests are its polls
        refused = [c for c in arrived if c.outcome == "refused"]
        p99 = percentile(latencies, 99) if latencies else math.nan
        if index == 0:
            steady_p99 = p99
        spike = phase.demand > phases[0].demand
        threshold = SETTLED_FACTOR * steady_p99
        figures.append(
            PhaseFigures(
                phase=phase,
                goodput=(sum(in_phase) / len(in_phase) / capacity) if in_phase else math.nan,
                p50=percentile(latencies, 50) if latencies else math.nan,
                p99=p99,
                p999=p999(latencies),
                short_errors=sum(1 for c in short if low <= c.planned < high and not c.ok),
                arrived=len(arrived),
                completed=len(completed),
                refused=len(refused),
                refused_with_hint=sum(1 for c in refused if c.retry_hint),
                lost=sum(1 for c in arrived if c.outcome in LOST_OUTCOMES),
                wrong=sum(1 for c in arrived if c.outcome == "wrong"),
                requests_per_call=(sum(c.requests for c in rounds) / len(rounds)) if rounds else math.nan,
                hand_backs={
                    reason: count / len(rounds)
                    for reason, count in sorted(Counter(r for c in rounds for r in c.hand_backs).items())
                },
                tasks_arrived=sum(1 for c in arrived if c.task),
                tasks_completed=sum(1 for c in completed if c.task),
                settle_up_s=settle_time(p99s, int(low - started), threshold) if spike else None,
                settle_down_s=settle_time(p99s, int(high - started), threshold) if spike else None,
            )
        )
    return figures
