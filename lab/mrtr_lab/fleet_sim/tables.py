"""The study's tables and what they say: p99.9 by strategy, the detail of every cell, and the verdicts."""

from __future__ import annotations

import math
from collections.abc import Sequence

from benchmarks.report import markdown_table
from mrtr_lab.fleet_sim.anchors import Anchor
from mrtr_lab.fleet_sim.strategies import STRATEGIES
from mrtr_lab.fleet_sim.study import SCENARIOS, Result

OURS, HEDGED = "hand-back", "hedged"
ALTERNATIVES = (
    "hand-back+two-choices",
    "hand-back+least-request",
    "hand-back+step-aside",
    "hand-back+least-request+step-aside",
)


def anchors(found: Sequence[tuple[Anchor, float, int]], servers: int, service_times: float) -> list[str]:
    lines = [
        f"The supermarket model on the model's own proxy and queues ({servers} one-slot instances, exponential "
        f"service, Poisson arrivals, {service_times:g} service times, each queue started at the formula's steady "
        "state, the first third not counted):",
        "",
    ]
    rows = [(a.name, f"{a.load:.2f}", f"{a.published:.2f}", f"{mean:.2f}", calls) for a, mean, calls in found]
    columns = ["anchor", "load", "published (n large), service times", "model", "calls counted"]
    return [*lines, *markdown_table(columns, "lrrrr", rows)]


def summary(results: Sequence[Result]) -> list[str]:
    """p99.9 per strategy (columns) for each scenario, size and load; the best of each row in bold."""
    keys = [k for k in STRATEGIES if any(r.cell.strategy.key == k for r in results)]
    rows = []
    for (scenario, size, load), row in _rows(results).items():
        values = {k: row[k].figures.p999 for k in keys if k in row}
        best = min((v for v in values.values() if not math.isnan(v)), default=math.nan)
        cells = [_bold(f"{values[k]:.2f}", values[k] == best) if k in values else "-" for k in keys]
        rows.append((scenario, f"{size:,}", f"{load:.2f}", *cells))
    columns = ["scenario", "instances", "load", *(STRATEGIES[k].label for k in keys)]
    return markdown_table(columns, "lrr" + "r" * len(keys), rows)


def detail(results: Sequence[Result], scenario: str) -> list[str]:
    event = {"upgrade": "upgrade s", "scale-out": "share s"}.get(scenario, "")
    rows = []
    for (name, size, load), row in _rows(results).items():
        if name != scenario:
            continue
        for key in STRATEGIES:
            if key not in row:
                continue
            r = row[key]
            f = r.figures
            hedged = f"{f.hedged / max(1, f.calls + f.unfinished):.1%}" if r.cell.strategy.hedge else "-"
            unfinished = f" (+{f.unfinished} unfinished)" if f.unfinished else ""
            line: list[object] = [
                f"{size:,}", f"{load:.2f}", r.cell.strategy.label, f"{f.calls}{unfinished}", f"{f.p50:.2f}",
                f"{f.p99:.2f}", f"{f.p999:.2f}", f"{f.lost_steps} ({f.duplicate_share:.1%})", hedged,
                f"{f.rounds:.2f}", r.runs,
            ]  # fmt: skip
            if event:
                value = "never" if r.event_seconds is None else f"{r.event_seconds:.1f}"
                if r.never and r.event_seconds is not None:
                    value += f" (never in {r.never} runs)"
                line.append(value)
            rows.append(line)
    columns = [
        "instances", "load", "strategy", "calls", "p50 s", "p99 s", "p99.9 s", "steps lost (% of useful)", "hedged",
        "hand-backs per call", "runs", *([event] if event else []),
    ]  # fmt: skip
    return markdown_table(columns, "rrlrrrrrrrr" + ("r" if event else ""), rows)


def verdicts(results: Sequence[Result]) -> list[str]:
    rows = _rows(results)
    lines = []
    pairs = [(key, row[OURS], row[HEDGED]) for key, row in rows.items() if OURS in row and HEDGED in row]
    if pairs:
        met = [key for key, ours, hedged in pairs if ours.figures.p999 <= hedged.figures.p999]
        missed = [f"{s} {n:,} at {x:.2f}" for (s, n, x), o, h in pairs if o.figures.p999 > h.figures.p999]
        lines.append(
            f"* Hand-back (round robin) against hedging at p95: p99.9 at least as good in {len(met)} of {len(pairs)} "
            "cells, with no duplicate work" + (f"; not in: {', '.join(missed)}" if missed else "") + "."
        )
    for alternative in ALTERNATIVES:
        against = [
            (key, row[OURS], row[alternative]) for key, row in rows.items() if OURS in row and alternative in row
        ]
        if not against:
            continue
        label = STRATEGIES[alternative].label
        for size in sorted({key[1] for key, _, _ in against}):
            mine = [(key, o, a) for key, o, a in against if key[1] == size]
            better = sum(a.figures.p999 < o.figures.p999 for _, o, a in mine)
            ratios = [a.figures.p999 / o.figures.p999 for _, o, a in mine if o.figures.p999 > 0]
            spread = f"{min(ratios):.2f}x to {max(ratios):.2f}x" if ratios else "-"
            lines.append(
                f"* {label} against hand-back with round robin at {size:,} instances: p99.9 lower in {better} of "
                f"{len(mine)} cells ({spread} of round robin's)."
            )
        hedged_pairs = [
            (row[alternative], row[HEDGED]) for row in rows.values() if alternative in row and HEDGED in row
        ]
        if hedged_pairs:
            met_h = sum(a.figures.p999 <= h.figures.p999 for a, h in hedged_pairs)
            lines.append(f"* {label} against hedging: p99.9 at least as good in {met_h} of {len(hedged_pairs)} cells.")
    hedging = [row[HEDGED].figures for row in rows.values() if HEDGED in row]
    if hedging:
        shares = [f.duplicate_share for f in hedging]
        lines.append(
            f"* Hedging's duplicate work: {min(shares):.1%} to {max(shares):.1%} of the useful steps "
            f"(hedges sent for {min(f.hedged / max(1, f.calls) for f in hedging):.1%} to "
            f"{max(f.hedged / max(1, f.calls) for f in hedging):.1%} of the calls)."
        )
    return lines or ["* (no cell to compare)"]


def task_verdicts(results: Sequence[Result]) -> list[str]:
    """The straggler rule on against off, where the work runs as task slices."""
    pairs = [
        (key, row["tasks-rule-on"], row["tasks-rule-off"])
        for key, row in _rows(results).items()
        if "tasks-rule-on" in row and "tasks-rule-off" in row
    ]
    if not pairs:
        return []
    better = [(k, on, off) for k, on, off in pairs if on.figures.p999 < off.figures.p999]
    ratios = [on.figures.p999 / off.figures.p999 for _, on, off in pairs if off.figures.p999 > 0]
    spread = f"{min(ratios):.2f}x to {max(ratios):.2f}x" if ratios else "-"
    return [
        f"* Task slices, straggler rule on against off: p99.9 lower in {len(better)} of {len(pairs)} cells "
        f"({spread} of the rule-off p99.9)."
    ]


def _rows(results: Sequence[Result]) -> dict[tuple[str, int, float], dict[str, Result]]:
    rows: dict[tuple[str, int, float], dict[str, Result]] = {}
    order = list(SCENARIOS)
    for r in sorted(results, key=lambda r: (order.index(r.cell.scenario), r.cell.size, r.cell.load)):
        rows.setdefault((r.cell.scenario, r.cell.size, r.cell.load), {})[r.cell.strategy.key] = r
    return rows


def _bold(text: str, yes: bool) -> str:
    return f"**{text}**" if yes else text
