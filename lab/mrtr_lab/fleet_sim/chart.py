"""The study as one picture: p99.9 against load, one panel per scenario and fleet size, one line per strategy.

Drawn with matplotlib's Agg backend (no display), as the why-shed chart is;
imported only when the picture is written.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mrtr_lab.fleet_sim.strategies import STRATEGIES
from mrtr_lab.fleet_sim.study import SCENARIOS, Result

COLOURS = {
    "hand-back": "#2a9d8f",
    "stay": "#e9c46a",
    "two-choices": "#f4a261",
    "hedged": "#e76f51",
    "hand-back+two-choices": "#264653",
    "hand-back+least-request": "#8ab17d",
    "tasks-rule-on": "#6a4c93",
    "tasks-rule-off": "#c77dff",
}


def draw(results: Sequence[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = [s for s in SCENARIOS if any(r.cell.scenario == s for r in results)]
    sizes = sorted({r.cell.size for r in results})
    fig, axes = plt.subplots(
        len(scenarios), len(sizes), figsize=(4.2 * len(sizes), 3.2 * len(scenarios)), squeeze=False
    )
    for row, scenario in zip(axes, scenarios, strict=True):
        for ax, size in zip(row, sizes, strict=True):
            if not any((r.cell.scenario, r.cell.size) == (scenario, size) for r in results):
                ax.axis("off")  # a cell not run is left out, never estimated (the report's coverage line says why)
                ax.text(0.5, 0.5, f"{SCENARIOS[scenario]}, {size:,} instances:\nnot run", ha="center", fontsize=9)
                continue
            for key, strategy in STRATEGIES.items():
                mine = sorted(
                    (
                        r
                        for r in results
                        if (r.cell.scenario, r.cell.size, r.cell.strategy.key) == (scenario, size, key)
                    ),
                    key=lambda r: r.cell.load,
                )
                points = [(r.cell.load, r.figures.p999) for r in mine if not math.isnan(r.figures.p999)]
                if points:
                    ax.plot(*zip(*points, strict=True), marker="o", label=strategy.label, color=COLOURS.get(key))
            ax.set_yscale("log")
            ax.set_title(f"{SCENARIOS[scenario]}, {size:,} instances", fontsize=9)
            ax.set_xlabel("load", fontsize=8)
            ax.grid(True, which="both", alpha=0.3)
        row[0].set_ylabel("p99.9 call latency, s", fontsize=9)
    legend: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=3, fontsize=8)
    fig.suptitle("Past two cores: p99.9 by strategy (fleet simulator, calibrated on the real cluster)")
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
