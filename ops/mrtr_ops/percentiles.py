"""Percentiles of measured latencies, by one ranking rule everywhere (the chaos report, the benchmarks).

The rule is `statistics.quantiles(values, n=100, method="inclusive")`: the
p-th percentile interpolates linearly between the two closest ranks of the
sorted values, at position (len - 1) * p / 100 (numpy's default, Excel's
PERCENTILE.INC). It never leaves the range of the values: p99 of a handful of
latencies is at most the largest one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], p: int) -> float:
    """The `p`-th percentile (1 to 99) of `values` by the rule above; NaN if there are none."""
    if not 1 <= p <= 99:
        raise ValueError(f"percentile {p} is not one of 1..99")
    if not values:
        return math.nan
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]
