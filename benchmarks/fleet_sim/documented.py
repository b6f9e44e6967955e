"""Reference cells read from docs/benchmarks.md: the why-shed, straggler, straggler-tasks and balance figures.

The real three-worker figures the model must reproduce were measured by
`scripts/bench why-shed`, `straggler` and `balance` on a quiet machine
(other processes ~1 % of the CPU); their sections of the report keep calls
done, p50, p99 and the upgrade and share seconds, not each call. This reads
those tables as they stand (whatever run last wrote them) into `Reference`
cells, each naming its source, so the calibration compares the model with
them beside any cells `calibrate.py` measured itself.
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks._balance_order import history, schedule
from benchmarks.fleet_sim.calibrate import Reference

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
QUARTER_SPEED_STOPPED = 0.75
"""The throttle's nominal stopped share; the why-shed table does not print the measured one (the straggler
runs of the same day measured 74-75 %)."""


def documented(report: Path) -> list[Reference]:
    text = report.read_text() if report.exists() else ""
    return (
        _why_shed(_section(text, "why-shed"))
        + _straggler(_section(text, "straggler"))
        + _straggler_tasks(_section(text, "straggler-tasks"))
        + _balance(_section(text, "balance"))
    )


def _section(text: str, name: str) -> str:
    found = re.search(rf"<!-- {re.escape(name)}:start -->(.*?)<!-- {re.escape(name)}:end -->", text, re.S)
    return found.group(1) if found else ""


def _when_and_others(section: str) -> tuple[str, float]:
    stamp = re.search(r"_Measured ([^;]+?) on ", section)
    others = re.search(r"other processes used (\d+)% of the CPU", section)
    return (stamp.group(1) if stamp else "?"), (int(others.group(1)) / 100 if others else 0.0)


def _rows(block: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in block.splitlines()
        if line.startswith("| ") and not line.startswith("| strategy") and not line.startswith("| run")
    ]


def _why_shed(section: str) -> list[Reference]:
    when, others = _when_and_others(section)
    found = []
    for scenario, block in re.findall(r"### \((\w)\)[^\n]*\n(.*?)(?=\n### |\nTargets|\Z)", section, re.S):
        for row in _rows(block):
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
                    source=f"docs/benchmarks.md: why-shed, {when}",
                    p50=float(row[2]),
                    p99=float(row[3]),
                )
            )
    return found


def _straggler(section: str) -> list[Reference]:
    """run | calls done | p50 | p90 | p99 | max | wrong / errors | moves | slices per call | stopped."""
    return _straggler_rows(section, "straggler", STRAGGLER_ROWS, WARMED_ROW, stopped_column=9)


def _straggler_tasks(section: str) -> list[Reference]:
    """run | tasks done | p50 | p90 | p99 | max | wrong / errors | moves | slices per task p50 | on slow | stopped."""
    return _straggler_rows(section, "straggler-tasks", TASK_ROWS, TASK_WARMED_ROW, stopped_column=10, on_slow_column=9)


def _straggler_rows(
    section: str,
    name: str,
    cells: dict[str, tuple[str, str]],
    warmed: tuple[str, str],
    *,
    stopped_column: int,
    on_slow_column: int | None = None,
) -> list[Reference]:
    """The straggler benchmark's tables (calls or tasks): 45 s a row, done within the window, nothing scraped."""
    when, others = _when_and_others(section)
    found = []
    for row in _rows(section):
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
                source=f"docs/benchmarks.md: {name}, {when}",
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


def _balance(section: str) -> list[Reference]:
    """cell | balance | calls completed | p50 | p99 | max | wrong / errors, over all rounds together: one
    reference per round, the calls split evenly (the percentiles are of all rounds' calls), each round after
    what its cluster served before it in the benchmark's order (`_balance_order`)."""
    when, others = _when_and_others(section)
    rounds_said = re.search(r"(\d+) rounds?", section)
    rounds = int(rounds_said.group(1)) if rounds_said else 1
    seconds_said = re.search(r"for ([\d.]+) s a cell", section)
    seconds = float(seconds_said.group(1)) if seconds_said else BALANCE_SECONDS
    rows = {
        (BALANCE_CELLS[row[0]], row[1].strip("`")): row
        for row in _rows(section)
        if row[0] in BALANCE_CELLS and len(row) >= 7
    }
    balances = list(dict.fromkeys(balance for _, balance in rows))
    scenarios = [scenario for scenario in BALANCE_CELLS.values() if any(key[0] == scenario for key in rows)]
    order = schedule(balances, scenarios, rounds)
    source = f"docs/benchmarks.md: balance, {when}"
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
