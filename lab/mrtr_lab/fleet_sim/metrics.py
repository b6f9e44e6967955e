"""The figures of one simulated cell: latency percentiles (p99.9 too), calls done, steps lost, duplicate work."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mrtr_lab.fleet_sim.client import Call


def percentile(values: Sequence[float], p: float) -> float:
    """The `p`-th percentile (0-100, fractions allowed: 99.9) by `mrtr_ops.percentiles`' rule (linear between
    the two closest ranks at (n - 1) p / 100); NaN if there are none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * p / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Figures:
    calls: int
    """Measured calls that completed."""
    unfinished: int
    """Measured calls that failed or had not completed when the run ended."""
    p50: float
    p99: float
    p999: float
    mean: float
    lost_steps: int
    """Steps the workers ran for the measured calls beyond what their answers needed."""
    useful_steps: int
    hedged: int
    rounds: float
    """Hand-backs per call, on average."""

    @property
    def duplicate_share(self) -> float:
        return self.lost_steps / self.useful_steps if self.useful_steps else 0.0

    @classmethod
    def of(cls, measured: Sequence[Call]) -> Figures:
        done = [c for c in measured if c.ended is not None]
        cut = [c.cut_at - c.started for c in measured if c.ended is None and c.cut_at is not None]
        seconds = [c.seconds for c in done] + cut  # an unfinished call counts with its time so far: a lower bound
        lost = sum(c.executed - c.steps for c in done) + sum(c.executed for c in measured if c.ended is None)
        return cls(
            calls=len(done),
            unfinished=len(measured) - len(done),
            p50=percentile(seconds, 50),
            p99=percentile(seconds, 99),
            p999=percentile(seconds, 99.9),
            mean=sum(c.seconds for c in done) / len(done) if done else math.nan,
            lost_steps=lost,
            useful_steps=sum(c.steps for c in done),
            hedged=sum(c.hedged for c in measured),
            rounds=sum(c.rounds for c in done) / len(done) if done else math.nan,
        )
