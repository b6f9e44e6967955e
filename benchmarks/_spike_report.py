"""The spike's section of docs/benchmarks.md: per setup and phase, then the targets for the default setup."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from benchmarks._spike_figures import SETTLED_FACTOR, PhaseFigures
from benchmarks._spike_load import DEADLINE_S
from benchmarks.report import markdown_table

if TYPE_CHECKING:
    from benchmarks.spike import SetupRun


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.0f}"


def _settle(value: float | None, spike: bool) -> str:
    if not spike:
        return ""
    return "not settled" if value is None else f"{value:.0f} s"


def _row(setup: str, f: PhaseFigures, spike: bool) -> tuple[object, ...]:
    refusals = f"{f.refused} ({f.refused_with_hint} with a hint)" if f.refused else "0"
    return (
        setup,
        f.phase.name,
        f"{f.phase.demand:.2f}",
        f"{f.goodput:.2f}",
        _ms(f.p50),
        _ms(f.p99),
        _ms(f.p999),
        _settle(f.settle_up_s, spike),
        _settle(f.settle_down_s, spike),
        "-" if math.isnan(f.requests_per_call) else f"{f.requests_per_call:.1f}",
        ", ".join(f"{reason} {n:.1f}" for reason, n in f.hand_backs.items()),
        f"{f.completed}/{f.arrived} (tasks {f.tasks_completed}/{f.tasks_arrived})",
        refusals,
        f.lost,
        f.short_errors,
    )


def _target(label: str, value: float, goal: str, met: bool) -> tuple[object, ...]:
    return (label, "-" if math.isnan(value) else f"{value:.2f}", goal, "met" if met else "**not met**")


def targets(figures: Sequence[PhaseFigures]) -> list[tuple[object, ...]]:
    """The issue's targets, read from the default setup's phases."""
    steady = figures[0]
    rows: list[tuple[object, ...]] = []
    for f in figures:
        if f.phase.demand <= steady.phase.demand:
            continue
        name = f.phase.name
        if f.phase.demand <= 1.5:
            ratio = f.p99 / steady.p99 if steady.p99 else math.nan
            settle = max(f.settle_up_s or math.inf, f.settle_down_s or math.inf)
            rows += [
                _target(f"{name}: goodput", f.goodput, ">= 0.9", f.goodput >= 0.9),
                _target(f"{name}: short p99 / steady", ratio, "<= 3", ratio <= 3),
                _target(f"{name}: settled (s, worse of up and down)", settle, "<= 2", settle <= 2),
                _target(
                    f"{name}: requests per completed call", f.requests_per_call, "<= 1.5", f.requests_per_call <= 1.5
                ),
                _target(f"{name}: lost", f.lost, "0", f.lost == 0),
            ]
        else:
            rows += [
                _target(f"{name}: goodput", f.goodput, ">= 0.8", f.goodput >= 0.8),
                _target(f"{name}: lost", f.lost, "0", f.lost == 0),
                _target(
                    f"{name}: refusals with a hint",
                    f.refused_with_hint,
                    f"all {f.refused}",
                    f.refused_with_hint == f.refused,
                ),
            ]
    return rows


def report(runs: Sequence[SetupRun], capacities: tuple[float, float], rate: float, maxconn: int) -> list[str]:
    """`capacities`: measured before and after the setups; the larger is the capacity goodput is measured against."""
    capacity = max(capacities)
    first = runs[0].phases if runs else []
    schedule = ", ".join(f"{p.name} ({p.demand:.2f}x, {p.seconds:g} s)" for p in first)
    lines = [
        "## A demand spike over the whole fleet",
        "",
        f"Three workers behind the entry point; the fleet's capacity, measured in the same run before and after the "
        f"setups (twice as many closed-loop callers as slots, shedding off): {capacities[0]:.1f} and "
        f"{capacities[1]:.1f} steps/s, the larger used: **{capacity:.1f} steps/s** (demand is planned on the first; "
        "**offered** is the demand over the capacity used). Long `count_primes` calls arrive open loop at the "
        "demand of each phase, one in five made as a task (run in slices from Redis, followed to its result) "
        f"({schedule}); `echo` short calls at {rate:g}/s throughout (latency from the planned send time). "
        f"A long call's caller gives up after {DEADLINE_S:g} s (counted lost). Setups one after the other: "
        f"the default, shedding off, HAProxy with `maxconn {maxconn}` per worker and a queue in front of "
        "the default workers, the default with the fleet-full rule (`FLEET_FULL_HOLD_MS=1000`), and that rule "
        "with busy refusals of new calls past a 40 s queue (`REFUSE_NEW_AFTER_MS=40000`). "
        "**Goodput**: the workers' steps/s over the capacity; **settled**: from the "
        f"step (up, then down) to the end of the first second whose short-call p99 is within {SETTLED_FACTOR:g}x "
        "the steady p99; **requests/call**: HTTP requests per completed long MRTR call (tasks apart), by arrival "
        "phase.",
        "",
    ]
    columns = [
        "setup", "phase", "offered", "goodput", "short p50 ms", "p99 ms", "p99.9 ms", "settled up", "settled down",
        "requests/call", "hand-backs/call", "long completed", "refused", "lost", "short errors",
    ]  # fmt: skip
    rows = [_row(run.name, f, f.phase.demand > run.phases[0].demand) for run in runs for f in run.figures]
    lines += markdown_table(columns, "llrrrrrrrrlrrrr", rows)
    for run in runs:
        if run.name in ("default", "fleet-full rule", "busy refusals"):
            lines += ["", f"The targets, on the setup {run.name!r}:", ""]
            lines += markdown_table(["target", "measured", "goal", ""], "lrll", targets(run.figures))
    endings = _endings(runs)
    if endings:
        lines += ["", "How the calls that did not complete ended (by setup, MRTR call or task, outcome and error):", ""]
        lines += markdown_table(["setup", "kind", "outcome", "error", "calls"], "llllr", endings)
    lines += [
        "",
        "Timelines: " + ", ".join(f"![{run.name}](spike-{run.name.replace(' ', '-').lower()}.png)" for run in runs),
    ]
    return lines


def _endings(runs: Sequence[SetupRun]) -> list[tuple[object, ...]]:
    """Every way a long call ended without its result, counted per setup."""
    rows: list[tuple[object, ...]] = []
    for run in runs:
        counted = Counter(
            ("task" if c.task else "MRTR call", c.outcome, c.detail or "-")
            for c in run.records
            if c.outcome != "complete"
        )
        rows += [(run.name, *key, n) for key, n in sorted(counted.items())]
    return rows
