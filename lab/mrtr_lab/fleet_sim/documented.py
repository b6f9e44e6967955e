"""Reference cells read from the studies' figures: the why-shed, straggler, straggler-tasks and balance JSON.

The real three-worker figures the model must reproduce were measured by
`scripts/bench why-shed`, `straggler` and `balance` on a quiet machine
(other processes ~1 % of the CPU); their figures (docs/lab/data/<name>.json)
keep calls done, p50, p99 and the upgrade and share seconds, not each call.
This reads those tables as they stand (whatever run last wrote them) into
`Reference` cells, each naming its source, so the calibration compares the
model with them beside any cells `calibrate.py` measured itself. A missing
file is an error: a calibration without its reference cells would be wrong.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from benchmarks.report import read_figures, tables
from mrtr_lab._balance_order import history, schedule
from mrtr_lab.fleet_sim.reference import Reference
from mrtr_lab.pages import STUDIES

WHY_SHED_STRATEGIES = {"checkpoint shedding": "ours", "stay where you land": "stay", "kill and start over": "kill"}
STRAGGLER_ROWS = {
    "all healthy, shedding on": ("healthy", "ours"),
    "one slow, shedding on (straggler rule)": ("a", "ours"),
    "one slow, shedding off": ("a", "stay"),
}
STRAGGLER_SECONDS = 45.0
TASK_ROWS = {
    "tasks, all healthy": ("tasks", "rule-on"),
    "tasks, one slow, straggler rule on": ("tasks-a", "rule-on"),
    "tasks, one slow, straggler rule off": ("tasks-a", "rule-off"),
}
"""The straggler benchmark's task rows (`_straggler_tasks.RUNS`): the rule-on cluster runs the healthy row, then
the slow one; the rule-off cluster runs its slow row alone."""
TASK_WARMED_ROW = ("tasks-a", "rule-on")
WARMED_ROW = ("a", "ours")
"""The straggler benchmark's slow row on the defaults runs on the cluster its healthy row has just loaded
(`straggler.RUNS`: both on the "shedding on" cluster); the other rows have a cluster of their own."""
BALANCE_CELLS = {"all healthy": "healthy", "one at a quarter speed": "a"}
BALANCE_SECONDS = 30.0
"""A balance cell's window when the section does not say it ("for 30 s a cell")."""
SOURCE = "docs/lab/data"
"""Where a cell read here came from (`calibrate.py` keeps such cells, "docs/...", apart from its own; the
committed calibration's say docs/benchmarks.md, where the tables were before they were kept as JSON)."""
QUARTER_SPEED_STOPPED = 0.75
"""The throttle's nominal stopped share; the why-shed table does not print the measured one (the straggler
runs of the same day measured 74-75 %)."""


def documented(report: Path = STUDIES) -> list[Reference]:
    """Every reference cell of the studies' figures kept for `report` (the lab's studies page)."""
    return (
        _why_shed(read_figures("why-shed", report))
        + _straggler(read_figures("straggler", report))
        + _straggler_tasks(read_figures("straggler-tasks", report))
        + _balance(read_figures("balance", report))
    )


def _when_and_others(figures: dict[str, Any]) -> tuple[str, float]:
    return figures["measured"] or "?", figures["others_share"] or 0.0


def _rows(figures: dict[str, Any]) -> list[list[str]]:
    return [row for _, table in tables(figures) for row in table["rows"]]


def _prose(figures: dict[str, Any]) -> str:
    return "\n".join(part for part in figures["parts"] if isinstance(part, str))


def _why_shed(figures: dict[str, Any]) -> list[Reference]:
    when, others = _when_and_others(figures)
    found = []
    for prose, table in tables(figures):
        heading = re.search(r"### \((\w)\)[^\n]*\n*\Z", prose)
        if heading is None:
            continue
        scenario = heading.group(1)
        for row in table["rows"]:
            strategy = WHY_SHED_STRATEGIES.get(row[0])
            if strategy is None or len(row) < 9:
                continue
            upgrade = re.match(r"([\d.]+) \(([\d.]+)\)", row[7])
            found.append(
                Reference(
                    scenario=scenario,
                    strategy=strategy,
                    calls=[],
                    completed=int(row[1]),
                    errors=0,
                    lost=float(row[5]),
                    others_share=others,
                    upgrade_seconds=float(upgrade.group(1)) if upgrade else None,
                    leaving_seconds=float(upgrade.group(2)) if upgrade else None,
                    share_seconds=_number(row[8]),
                    stopped_share=QUARTER_SPEED_STOPPED if scenario == "a" else None,
                    source=f"{SOURCE}: why-shed, {when}",
                    p50=float(row[2]),
                    p99=float(row[3]),
                )
            )
    return found


def _straggler(figures: dict[str, Any]) -> list[Reference]:
    """run | calls done | p50 | p90 | p99 | max | wrong / errors | moves | slices per call | stopped."""
    return _straggler_rows(figures, "straggler", STRAGGLER_ROWS, WARMED_ROW, stopped_column=9)


def _straggler_tasks(figures: dict[str, Any]) -> list[Reference]:
    """run | tasks done | p50 | p90 | p99 | max | wrong / errors | moves | slices per task p50 | on slow | stopped."""
    return _straggler_rows(figures, "straggler-tasks", TASK_ROWS, TASK_WARMED_ROW, stopped_column=10, on_slow_column=9)


def _straggler_rows(
    figures: dict[str, Any],
    name: str,
    cells: dict[str, tuple[str, str]],
    warmed: tuple[str, str],
    *,
    stopped_column: int,
    on_slow_column: int | None = None,
) -> list[Reference]:
    """The straggler benchmark's tables (calls or tasks): 45 s a row, done within the window, nothing scraped."""
    when, others = _when_and_others(figures)
    found = []
    for row in _rows(figures):
        cell = cells.get(row[0])
        if cell is None or len(row) <= stopped_column:
            continue
        stopped = _number(row[stopped_column].rstrip("%"))
        slow_row = cell[0] not in ("healthy", "tasks")
        on_slow = _number(row[on_slow_column].rstrip("%")) if on_slow_column is not None and slow_row else None
        found.append(
            Reference(
                scenario=cell[0],
                strategy=cell[1],
                calls=[],
                completed=int(row[1]),
                errors=0,
                lost=0.0,
                others_share=others,
                stopped_share=stopped / 100 if stopped is not None else None,
                source=f"{SOURCE}: {name}, {when}",
                p50=float(row[2]),
                p99=float(row[4]),
                duration=STRAGGLER_SECONDS,
                in_window=True,
                scraped=False,
                before=[("healthy", STRAGGLER_SECONDS)] if cell == warmed else [],
                on_slow=on_slow / 100 if on_slow is not None else None,
            )
        )
    return found


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _balance(figures: dict[str, Any]) -> list[Reference]:
    """cell | balance | calls completed | p50 | p99 | max | wrong / errors, over all rounds together: one
    reference per round, the calls split evenly (the percentiles are of all rounds' calls), each round after
    what its cluster served before it in the benchmark's order (`_balance_order`)."""
    when, others = _when_and_others(figures)
    said = _prose(figures)
    rounds_said = re.search(r"(\d+) rounds?", said)
    rounds = int(rounds_said.group(1)) if rounds_said else 1
    seconds_said = re.search(r"for ([\d.]+) s a cell", said)
    seconds = float(seconds_said.group(1)) if seconds_said else BALANCE_SECONDS
    rows = {
        (BALANCE_CELLS[row[0]], row[1].strip("`")): row
        for row in _rows(figures)
        if row[0] in BALANCE_CELLS and len(row) >= 7
    }
    balances = list(dict.fromkeys(balance for _, balance in rows))
    scenarios = [scenario for scenario in BALANCE_CELLS.values() if any(key[0] == scenario for key in rows)]
    order = schedule(balances, scenarios, rounds)
    source = f"{SOURCE}: balance, {when}"
    found = []
    for (scenario, balance), row in rows.items():
        total = int(row[2])
        for index, slot in enumerate(order):
            if (slot.scenario, slot.balance) != (scenario, balance):
                continue
            found.append(
                Reference(
                    scenario=scenario,
                    strategy="ours",
                    calls=[],
                    completed=total // rounds + (slot.round < total % rounds),
                    errors=0,
                    lost=0.0,
                    others_share=others,
                    stopped_share=QUARTER_SPEED_STOPPED if scenario == "a" else None,
                    source=source,
                    p50=float(row[3]),
                    p99=float(row[4]),
                    duration=seconds,
                    before=history(order, index, seconds),
                    balance=balance,
                    run=source,
                )
            )
    return found
