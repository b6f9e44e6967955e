"""The spike at fleet scale: the spike benchmark's schedule and setups in the fleet simulator.

    scripts/bench spike-sim [--sizes 3,100,1000] [--seeds 3] [--setups ...] [--jobs 2] [--no-report]

The real benchmark (`scripts/bench spike`) measures three workers; this runs the same phases, the same
long-call mix and deadline and the same workers' settings (`benchmarks.spike.SETTINGS`: HAProxy's
limiter is a proxy, not a policy, and is left to the real run) over simulated fleets
(`mrtr_lab.fleet_sim.spike`), every instance deciding with the real policy objects. The three-instance
cell is set beside the real run's figures (`docs/data/spike.json`) as the calibration point. Writes
the section to docs/lab/studies.md.
"""

from __future__ import annotations

import math
import multiprocessing
import statistics
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from benchmarks._spike_load import DEADLINE_S
from benchmarks.report import markdown_table, parser, publish, read_figures, tables
from benchmarks.spike import PHASES, SETTINGS
from mrtr_lab.fleet_sim.calibrate import load
from mrtr_lab.fleet_sim.model import Model
from mrtr_lab.fleet_sim.spike import SimPhase, simulate
from mrtr_lab.pages import STUDIES

NAME = "spike-sim"
REAL_SIZE = 3
"""The real benchmark's fleet: its cell is the calibration point."""


@dataclass(frozen=True)
class Cell:
    setup: str
    size: int
    phases: list[list[SimPhase]]
    """One list of phases per seed."""


def _cell(model: Model, setup: str, size: int, seeds: int) -> Cell:
    runs = [simulate(model, SETTINGS[setup], size, list(PHASES), seed=seed) for seed in range(1, seeds + 1)]
    return Cell(setup, size, runs)


def _mean(values: Sequence[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return statistics.fmean(kept) if kept else math.nan


def _row(cell: Cell, index: int) -> tuple[object, ...]:
    runs = [run[index] for run in cell.phases]
    arrived = sum(p.arrived for p in runs)
    return (
        cell.setup,
        f"{cell.size:,}",
        runs[0].phase.name,
        f"{_mean([p.goodput for p in runs]):.2f}",
        f"{_mean([p.requests_per_call for p in runs]):.1f}",
        f"{sum(p.completed for p in runs) / arrived:.1%}" if arrived else "-",
        f"{sum(p.refused for p in runs) / arrived:.1%}" if arrived else "-",
        f"{sum(p.timed_out for p in runs) / arrived:.1%}" if arrived else "-",
    )


def _real_rows() -> dict[tuple[str, str], dict[str, str]]:
    """The real run's rows by (setup, phase), from its figures file."""
    figures = read_figures("spike")
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for _, table in tables(figures):
        columns = table["columns"]
        if "setup" in columns and "phase" in columns:
            for row in table["rows"]:
                record = dict(zip(columns, row, strict=True))
                rows[(str(record["setup"]), str(record["phase"]))] = {k: str(v) for k, v in record.items()}
    return rows


def _calibration(cells: Sequence[Cell]) -> list[tuple[object, ...]]:
    real = _real_rows()
    rows: list[tuple[object, ...]] = []
    for cell in cells:
        if cell.size != REAL_SIZE:
            continue
        for index, phase in enumerate(PHASES):
            measured = real.get((cell.setup, phase.name))
            if measured is None:
                continue
            runs = [run[index] for run in cell.phases]
            arrived = sum(p.arrived for p in runs)
            lost = sum(p.timed_out for p in runs)
            rows.append(
                (
                    cell.setup,
                    phase.name,
                    measured["goodput"],
                    f"{_mean([p.goodput for p in runs]):.2f}",
                    measured["requests/call"],
                    f"{_mean([p.requests_per_call for p in runs]):.1f}",
                    f"{measured['lost']}/{measured['long completed'].split('/')[1].split()[0]}",
                    f"{lost / len(runs):.1f}/{arrived / len(runs):.0f}",
                )
            )
    return rows


def section(cells: Sequence[Cell], seeds: int) -> list[str]:
    schedule = ", ".join(f"{p.name} ({p.demand:g}x, {p.seconds:g} s)" for p in PHASES)
    lines = [
        "## The spike at fleet scale (simulated)",
        "",
        "The spike benchmark's schedule ([the real run](../benchmarks.md#a-demand-spike-over-the-whole-fleet): "
        f"{schedule}) in the fleet simulator: the same long-call mix (8, 20 and 40 steps, each the calibrated "
        "short call's step) arriving open loop, the same workers' settings per setup, the same "
        f"{DEADLINE_S:g} s deadline after which a caller gives up (counted as timed out: its steps were for "
        "nothing), every instance deciding with the real policy objects, round robin, each instance on cores "
        f"of its own. Figures over {seeds} seeds (goodput and requests per completed call: their mean; how "
        "the calls ended: shares of all that arrived in the phase). Short calls take no slot and are left to "
        "the real run.",
        "",
    ]
    columns = ["setup", "instances", "phase", "goodput", "requests/call", "completed", "refused (busy)", "timed out"]
    rows = [_row(cell, index) for cell in cells for index in range(len(PHASES))]
    lines += markdown_table(columns, "lrlrrrrr", rows)
    calibration = _calibration(cells)
    if calibration:
        lines += [
            "",
            f"The calibration point: the {REAL_SIZE}-instance cells beside the real run's figures (lost: calls "
            "past their deadline, wrong or broken; the simulator's are its timed-out calls, per seed).",
            "",
        ]
        columns = ["setup", "phase", "goodput real", "sim", "requests/call real", "sim", "lost real", "sim"]
        lines += markdown_table(columns, "llrrrrrr", calibration)
    return lines


def main() -> int:
    p = parser(__doc__, duration=0.0, duration_help="unused: the schedule is the spike benchmark's")
    p.add_argument("--sizes", default="3,100,1000", help="fleet sizes (default 3,100,1000)")
    p.add_argument("--seeds", type=int, default=3, help="runs per cell (default 3)")
    p.add_argument("--setups", default=",".join(SETTINGS), help=f"comma-separated, of: {', '.join(SETTINGS)}")
    p.add_argument("--jobs", type=int, default=2, help="cells simulated at once, one process each (default 2)")
    args = p.parse_args()
    setups = [name.strip() for name in args.setups.split(",") if name.strip()]
    unknown = sorted(set(setups) - set(SETTINGS))
    if unknown:
        p.error(f"unknown setups {unknown}; known: {list(SETTINGS)}")
    sizes = [int(size) for size in args.sizes.split(",")]
    model = Model.from_calibration(load())
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max(1, args.jobs), mp_context=context) as pool:
        futures: list[Any] = [
            pool.submit(_cell, model, setup, size, args.seeds) for size in sorted(sizes) for setup in setups
        ]
        cells = [future.result() for future in futures]
    publish(NAME, section(cells, args.seeds), write=not args.no_report, report=STUDIES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
