"""The calibration check: the model's runs of the real cells beside the real figures, calls done and p99.

A cell's real figures are the mean over its real runs: the why-shed table's
run and those of `calibrate.py` (which runs why-shed's cells as why_shed.py
does) pool into one cell, since one run of a 30 s window is a noisy
reference (it holds about one call above its p99); so do the balance table's
runs and those of `calibrate.py --add-balance`, whose percentiles are of all a
run's rounds together, as the table prints them. The model's figures are
the mean over `seeds` runs of each real run. The gap is model / real - 1;
the target is within 15 % for both figures; the real runs' range is shown
beside each mean.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from benchmarks.report import markdown_table
from mrtr_lab.fleet_sim.calibrate import BALANCE_MEASURED, Calibration, when_measured
from mrtr_lab.fleet_sim.metrics import percentile
from mrtr_lab.fleet_sim.reference import Reference
from mrtr_lab.fleet_sim.replay import Replayed, replay

TOLERANCE = 0.15
LABELS = {
    "healthy": "healthy",
    "a": "(a) one at a quarter speed",
    "b": "(b) rolling upgrade",
    "c": "(c) scale-out 2 to 4",
    "tasks": "tasks, all healthy",
    "tasks-a": "tasks, (a) one at a quarter speed",
}
STRATEGIES = {
    "ours": "hand-back",
    "stay": "stay where you land",
    "kill": "kill and start over",
    "rule-on": "task slices, straggler rule on",
    "rule-off": "task slices, straggler rule off",
}
BALANCES = {
    "two_choices": "two choices",
    "least_request": "least request",
    "round_robin+step_aside": "round robin, slow steps aside",
    "least_request+step_aside": "least request, slow steps aside",
}
MEASURED = "measured by calibrate.py"
WHY_SHED = ("docs/benchmarks.md: why-shed", "docs/lab/data: why-shed")
BALANCE = ("docs/benchmarks.md: balance", "docs/lab/data: balance")
"""Cells read from the studies' figures: named after the page before they were kept as JSON, the JSON since."""


@dataclass(frozen=True)
class Compared:
    source: str
    benchmark: str
    """What the runs are runs of (`benchmark`): why-shed for its table's run and `calibrate.py`'s alike."""
    scenario: str
    strategy: str
    balance: str
    """The proxy's balance (round robin but in the balance benchmark's cells)."""
    repeats: int
    """Real runs pooled into this cell (a run of several rounds counts once)."""
    others_share: float
    real_calls: float
    model_calls: float
    real_p99: float
    model_p99: float
    real_p50: float
    model_p50: float
    real_extra: float | None
    """(b) the old instances' time to leave, (c) the new ones' time to carry their share."""
    model_extra: float | None
    real_on_slow: float | None = None
    """Task cells with a slow worker: the share of the slices begun on it."""
    model_on_slow: float | None = None
    real_calls_range: tuple[float, float] | None = None
    """The fewest and most calls done in one real run, per round where a run has rounds (None: one run)."""
    real_p99_range: tuple[float, float] | None = None

    @property
    def calls_gap(self) -> float:
        return self.model_calls / self.real_calls - 1 if self.real_calls else float("nan")

    @property
    def p99_gap(self) -> float:
        return self.model_p99 / self.real_p99 - 1 if self.real_p99 else float("nan")

    @property
    def within(self) -> bool:
        return abs(self.calls_gap) <= TOLERANCE and abs(self.p99_gap) <= TOLERANCE


def benchmark(ref: Reference) -> str:
    """The benchmark a real run is one run of: `calibrate.py`'s runs are why-shed's cells, run as why_shed.py
    runs them, so they pool with the why-shed table's, and its balance runs (`--add-balance`) with the balance
    table's; every other source is a benchmark of its own."""
    if ref.source == MEASURED or ref.source.startswith(WHY_SHED):
        return "why-shed"
    if ref.source.startswith((*BALANCE, BALANCE_MEASURED)):
        return "balance"
    return ref.source


def pooled(references: list[Reference]) -> dict[tuple[str, str, str, str], list[Reference]]:
    """The real runs of each cell, by benchmark, scenario, strategy and balance, in the order first met."""
    cells: dict[tuple[str, str, str, str], list[Reference]] = {}
    for ref in references:
        cells.setdefault((benchmark(ref), ref.scenario, ref.strategy, ref.balance), []).append(ref)
    return cells


def sources(refs: list[Reference]) -> str:
    """Where a cell's runs come from: each source once, with how many runs it gave when more than one."""
    counts: dict[str, int] = {}
    for ref in refs:
        counts[ref.source] = counts.get(ref.source, 0) + 1
    rounds = {ref.source for ref in refs if ref.run == ref.source}  # one run's rounds (the balance benchmark's)
    return "; ".join(
        source if n == 1 else f"{source} ({n} {'rounds' if source in rounds else 'runs'})"
        for source, n in counts.items()
    )


def compare(cal: Calibration, seeds: int) -> list[Compared]:
    """Every cell of the calibration, each real run replayed `seeds` times with its own measured neighbours.

    Percentiles are a run's: of all its rounds' calls together where it pools them (`Reference.run`, the
    balance table), real and modelled alike (a seed's replays of the rounds pooled)."""
    found = []
    for (bench, scenario, strategy, balance), refs in pooled(cal.reference).items():
        replays = [[replay(cal, ref, seed) for seed in range(1, seeds + 1)] for ref in refs]
        runs: list[Replayed] = [r for per_ref in replays for r in per_ref]
        groups = _runs(refs, replays)
        p99s = [_real_run_percentile(group_refs, 99) for group_refs, _ in groups]
        ranged = len(groups) > 1
        calls = [statistics.fmean(r.completed for r in group_refs) for group_refs, _ in groups]
        found.append(
            Compared(
                source=sources(refs),
                benchmark=bench,
                scenario=scenario,
                strategy=strategy,
                balance=balance,
                repeats=len(groups),
                others_share=statistics.fmean(r.others_share for r in refs),
                real_calls=statistics.fmean(r.completed for r in refs),
                model_calls=statistics.fmean(r.completed for r in runs),
                real_p99=statistics.fmean(p99s),
                model_p99=statistics.fmean(_model_run_percentile(group, 99) for _, group in groups),
                real_p50=statistics.fmean(_real_run_percentile(group_refs, 50) for group_refs, _ in groups),
                model_p50=statistics.fmean(_model_run_percentile(group, 50) for _, group in groups),
                real_extra=_mean([_extra_real(r) for r in refs]),
                model_extra=_mean([_extra_model(r) for r in runs]),
                real_on_slow=_mean([r.on_slow for r in refs]),
                model_on_slow=_mean([r.on_slow for r in runs]),
                real_calls_range=(min(calls), max(calls)) if ranged else None,
                real_p99_range=(min(p99s), max(p99s)) if ranged else None,
            )
        )
    return found


Run = tuple[list[Reference], list[list[Replayed]]]
"""A real run's rounds and, per round, its replays (one per seed)."""


def _runs(refs: list[Reference], replays: list[list[Replayed]]) -> list[Run]:
    """The cell's real runs: rounds of one `Reference.run` together, every other reference a run of its own."""
    groups: dict[object, Run] = {}
    for index, (ref, replayed) in enumerate(zip(refs, replays, strict=True)):
        group = groups.setdefault(ref.run if ref.run is not None else index, ([], []))
        group[0].append(ref)
        group[1].append(replayed)
    return list(groups.values())


def _real_run_percentile(refs: list[Reference], q: float) -> float:
    """A run's percentile: of all its rounds' calls, or as the report printed it for them all (`documented`)."""
    if len(refs) == 1 or not all(ref.calls for ref in refs):
        return real_percentile(refs[0], q)
    return percentile([seconds for ref in refs for _, seconds in ref.calls], q)


def _model_run_percentile(replays: list[list[Replayed]], q: float) -> float:
    """The mean over seeds of the percentile of the run: a seed's replays of every round, their calls pooled."""
    if len(replays) == 1:
        return statistics.fmean(r.p50 if q == 50 else r.p99 if q == 99 else float("nan") for r in replays[0])
    by_seed = zip(*replays, strict=True)
    return statistics.fmean(percentile([s for round_ in seed for s in round_.seconds], q) for seed in by_seed)


def real_percentile(ref: Reference, q: float) -> float:
    """The cell's percentile: from its calls, or as the report printed it (`documented`)."""
    if not ref.calls:
        printed = ref.p50 if q == 50 else ref.p99 if q == 99 else None
        return printed if printed is not None else float("nan")
    return percentile([seconds for _, seconds in ref.calls], q)


def _extra_real(ref: Reference) -> float | None:
    return ref.leaving_seconds if ref.scenario == "b" else ref.share_seconds if ref.scenario == "c" else None


def _extra_model(run: Replayed) -> float | None:
    return run.leaving_seconds if run.scenario == "b" else run.share_seconds if run.scenario == "c" else None


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def table(compared: list[Compared], cal: Calibration, seeds: int) -> list[str]:
    lines = [
        "Real: the cells of `lab/mrtr_lab/fleet_sim/calibration.json`, each naming where its figures come from: "
        "the why-shed, straggler, straggler-tasks and balance tables of this report (a quiet machine; the "
        "straggler benchmark runs 45 s and counts calls, or tasks, done within the window), and runs of "
        "`calibrate.py` itself (every call kept), which runs why-shed's cells as why_shed.py does: a why-shed "
        "cell's runs from both are one row, its real figures the mean of its runs, the fewest and most beside it "
        "(one run of a 30 s window is a noisy reference). The task rows: 6 callers create 20-step tasks on 3 "
        "workers and follow them to their results, 45 s a row. Parameters "
        f"measured {when_measured(cal)} on {cal.machine}. The why-shed sizes "
        f"(healthy and (a): {cal.sizes['callers']} callers of the {cal.sizes['short_steps']}-step call for "
        f"{cal.sizes['duration']:g} s on 3 workers; (b) {cal.sizes['long_callers']} callers of the "
        f"{cal.sizes['long_steps']}-step call through an upgrade of 3 workers; (c) {cal.sizes['overload']} callers, "
        f"2 workers and 2 more after {cal.sizes['warmup']:g} s, then {cal.sizes['duration']:g} s). Model: the mean "
        f"of {seeds} seeds per real run, on {cal.cores} cores less the share other processes took during that "
        "real run. **Gap**: model / real mean - 1; target within 15 % for calls done and p99. Last column: (b) seconds "
        "the old instances took to leave, (c) seconds until the new ones carried their share, real / model.",
        "",
    ]
    rows = []
    for c in compared:
        extra = "-" if c.real_extra is None and c.model_extra is None else f"{_s(c.real_extra)} / {_s(c.model_extra)}"
        cell = (c.source, LABELS.get(c.scenario, c.scenario), _strategy(c), c.repeats)
        calls = (
            f"{c.others_share:.0%}",
            f"{c.real_calls:.0f}",
            _spread(c.real_calls_range, "{:.0f}"),
            f"{c.model_calls:.0f}",
            _gap(c.calls_gap),
        )
        p99 = (
            f"{c.real_p99:.1f}",
            _spread(c.real_p99_range, "{:.1f}"),
            f"{c.model_p99:.1f}",
            _gap(c.p99_gap),
        )
        p50 = f"{c.real_p50:.1f} / {c.model_p50:.1f}"
        rows.append((*cell, *calls, *p99, p50, extra, "yes" if c.within else "**no**"))
    columns = [
        "real figures from", "cell", "strategy", "runs", "others' CPU", "calls real", "runs' range", "model",
        "gap", "p99 s real", "runs' range", "model", "gap", "p50 s real / model", "leave or share s, real / model",
        "within 15 %",
    ]  # fmt: skip
    lines += markdown_table(columns, "lllrrrrrrrrrrlll", rows)
    held = sum(c.within for c in compared)
    worst = max(compared, key=lambda c: max(abs(c.calls_gap), abs(c.p99_gap)), default=None)
    slow_tasks = [c for c in compared if c.real_on_slow is not None or c.model_on_slow is not None]
    if slow_tasks:
        shares = "; ".join(
            f"{STRATEGIES.get(c.strategy, c.strategy)} {_share(c.real_on_slow)} real, {_share(c.model_on_slow)} model"
            for c in slow_tasks
        )
        lines += ["", f"Task slices begun on the slow worker: {shares}."]
    lines += ["", f"Within 15 % in {held} of {len(compared)} cells."]
    if worst is not None:
        lines[-1] += (
            f" The largest gap: {LABELS.get(worst.scenario, worst.scenario)}, {_strategy(worst)} "
            f"(calls {_gap(worst.calls_gap)}, p99 {_gap(worst.p99_gap)})."
        )
    return lines


def _strategy(c: Compared) -> str:
    name = STRATEGIES.get(c.strategy, c.strategy)
    return name if c.balance == "round_robin" else f"{name}, {BALANCES.get(c.balance, c.balance)}"


def _gap(gap: float) -> str:
    """A gap in whole per cent, but to a tenth where whole per cent would hide which side of the target it is
    (+15.4 % is out, and would print as +15 %)."""
    whole = f"{gap:+.0%}"
    return f"{gap:+.1%}" if abs(round(gap * 100)) == round(TOLERANCE * 100) else whole


def _spread(bounds: tuple[float, float] | None, figure: str) -> str:
    """The runs' range; "-" for one run, or runs whose own figures are not known (the balance table prints
    all its rounds' together: `documented`)."""
    if bounds is None:
        return "-"
    low, high = (figure.format(bound) for bound in bounds)
    return low if low == high else f"{low} to {high}"


def _s(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"
