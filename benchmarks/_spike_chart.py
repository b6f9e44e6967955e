"""The spike's timeline per setup: demand and goodput over capacity, and the short calls' p99 per second.

Drawn with matplotlib's Agg backend (no display), as the walkthrough's timeline is.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks._spike_figures import starts, step_rates

if TYPE_CHECKING:
    from benchmarks.spike import SetupRun


def draw(run: SetupRun, capacity: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    edges = [edge - run.started for edge in starts(run.phases, run.started)]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    demand_x = [x for edge in itertools.pairwise(edges) for x in edge]
    demand_y = [phase.demand for phase in run.phases for _ in (0, 1)]
    top.plot(demand_x, demand_y, color="grey", linestyle="--", label="offered demand")
    rates = step_rates(run.samples)
    top.plot([at - run.started for at, _ in rates], [rate / capacity for _, rate in rates], label="goodput")
    top.set_ylabel("x capacity")
    top.set_title(f"{run.name}: offered long-call demand and steps run, over the fleet's capacity")
    top.legend(fontsize=8, loc="upper right")
    seconds = [n + 0.5 for n in range(len(run.p99_by_second))]
    bottom.plot(seconds, run.p99_by_second, drawstyle="steps-mid", color="crimson")
    bottom.set_yscale("log")
    bottom.set_ylabel("short-call p99 ms")
    bottom.set_xlabel("seconds since the schedule started")
    for axis in (top, bottom):
        for edge in edges[1:-1]:
            axis.axvline(edge, color="black", linewidth=0.5, alpha=0.4)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
