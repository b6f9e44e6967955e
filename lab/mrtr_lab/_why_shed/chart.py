"""The comparison as one picture: a row of bars per scenario, one bar per strategy.

Drawn with matplotlib's Agg backend (no display), as the walkthrough draws
its timeline; imported only when the picture is written.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from mrtr_lab._why_shed.fleet import Strategy
from mrtr_lab._why_shed.scenarios import SCENARIOS, Cell

COLOURS = {Strategy.OURS: "#2a9d8f", Strategy.STAY: "#e9c46a", Strategy.KILL: "#e76f51"}
Figure = tuple[str, Callable[[Cell], float | None]]


def _figures(scenario: str) -> list[Figure]:
    common: list[Figure] = [
        ("calls completed", lambda c: c.load.completed),
        ("p99 call latency, s", lambda c: c.p(99)),
        ("steps thrown away", lambda c: c.lost),
    ]
    extra: dict[str, Figure] = {
        "a": ("p50 call latency, s", lambda c: c.p(50)),
        "b": ("s the old instances took to leave", lambda c: c.leaving_seconds),
        "c": ("s until new instances carry their share", lambda c: c.share_seconds),
    }
    return [*common, extra[scenario]]


def draw(cells: Sequence[Cell], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = [s for s in SCENARIOS if any(c.scenario == s for c in cells)]
    fig, axes = plt.subplots(len(scenarios), 4, figsize=(14, 3.2 * len(scenarios)), squeeze=False)
    for row, scenario in zip(axes, scenarios, strict=True):
        mine = [c for c in cells if c.scenario == scenario]
        for ax, (title, value) in zip(row, _figures(scenario), strict=True):
            values = [value(c) for c in mine]
            heights = [0.0 if v is None or math.isnan(v) else v for v in values]
            bars = ax.bar(range(len(mine)), heights, color=[COLOURS[c.strategy] for c in mine])
            for bar, v in zip(bars, values, strict=True):
                label = "never" if v is None else f"{v:.3g}"
                ax.annotate(label, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom")
            ax.set_xticks(range(len(mine)), [c.strategy.value.replace(" ", "\n", 1) for c in mine], fontsize=8)
            ax.set_title(title, fontsize=9)
            ax.margins(y=0.2)
        row[0].set_ylabel(f"({scenario}) {SCENARIOS[scenario]}", fontsize=9)
    fig.suptitle("Why shed: checkpoint shedding against staying where a call lands and killing it")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
