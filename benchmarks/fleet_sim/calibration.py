"""The calibration check: the model's runs of the real cells beside the real figures, calls done and p99.

Real figures are the mean over the repeats `calibrate.py` ran; the model's
the mean over `seeds` runs of the same cell. The gap is model / real - 1;
the target is within 15 % for both figures.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from benchmarks.fleet_sim.calibrate import Calibration, Reference
from benchmarks.fleet_sim.metrics import percentile
from benchmarks.fleet_sim.replay import Replayed, replay
from benchmarks.report import markdown_table

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
BALANCES = {"two_choices": "two choices", "least_request": "least request"}


@dataclass(frozen=True)
class Compared:
    source: str
    scenario: str
    strategy: str
    balance: str
    """The proxy's balance (round robin but in the balance benchmark's cells)."""
    repeats: int
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

    @property
    def calls_gap(self) -> float:
        return self.model_calls / self.real_calls - 1 if self.real_calls else float("nan")

    @property
    def p99_gap(self) -> float:
        return self.model_p99 / self.real_p99 - 1 if self.real_p99 else float("nan")

    @property
    def within(self) -> bool:
        return abs(self.calls_gap) <= TOLERANCE and abs(self.p99_gap) <= TOLERANCE


def compare(cal: Calibration, seeds: int) -> list[Compared]:
    """Every cell of the calibration, each real repeat replayed `seeds` times with its own measured neighbours."""
    cells: dict[tuple[str, str, str, str], list[Reference]] = {}
    for ref in cal.reference:
        cells.setdefault((ref.source, ref.scenario, ref.strategy, ref.balance), []).append(ref)
    found = []
    for (source, scenario, strategy, balance), refs in cells.items():
        runs: list[Replayed] = [replay(cal, ref, seed) for ref in refs for seed in range(1, seeds + 1)]
        found.append(
            Compared(
                source=source,
                scenario=scenario,
                strategy=strategy,
                balance=balance,
                repeats=len(refs),
                others_share=statistics.fmean(r.others_share for r in refs),
                real_calls=statistics.fmean(r.completed for r in refs),
                model_calls=statistics.fmean(r.completed for r in runs),
                real_p99=statistics.fmean(real_percentile(r, 99) for r in refs),
                model_p99=statistics.fmean(r.p99 for r in runs),
                real_p50=statistics.fmean(real_percentile(r, 50) for r in refs),
                model_p50=statistics.fmean(r.p50 for r in runs),
                real_extra=_mean([_extra_real(r) for r in refs]),
                model_extra=_mean([_extra_model(r) for r in runs]),
                real_on_slow=_mean([r.on_slow for r in refs]),
                model_on_slow=_mean([r.on_slow for r in runs]),
            )
        )
    return found


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
        "Real: the cells of `benchmarks/fleet_sim/calibration.json`, each naming where its figures come from: "
        "the why-shed, straggler and straggler-tasks tables of this report (a quiet machine; the straggler "
        "benchmark runs 45 s and counts calls, or tasks, done within the window), or a run of `calibrate.py` itself "
        "(every call kept). The task rows: 6 callers create 20-step tasks on 3 workers and follow them to their "
        "results, 45 s a row. Parameters "
        f"measured {cal.measured_at} on {cal.machine}. The why-shed sizes "
        f"(healthy and (a): {cal.sizes['callers']} callers of the {cal.sizes['short_steps']}-step call for "
        f"{cal.sizes['duration']:g} s on 3 workers; (b) {cal.sizes['long_callers']} callers of the "
        f"{cal.sizes['long_steps']}-step call through an upgrade of 3 workers; (c) {cal.sizes['overload']} callers, "
        f"2 workers and 2 more after {cal.sizes['warmup']:g} s, then {cal.sizes['duration']:g} s). Model: the mean "
        f"of {seeds} seeds per real repeat, on {cal.cores} cores less the share other processes took during that "
        "real cell. **Gap**: model / real - 1; target within 15 % for calls done and p99. Last column: (b) seconds "
        "the old instances took to leave, (c) seconds until the new ones carried their share, real / model.",
        "",
    ]
    rows = []
    for c in compared:
        extra = "-" if c.real_extra is None and c.model_extra is None else f"{_s(c.real_extra)} / {_s(c.model_extra)}"
        cell = (c.source, LABELS.get(c.scenario, c.scenario), _strategy(c), c.repeats)
        calls = (f"{c.others_share:.0%}", f"{c.real_calls:.0f}", f"{c.model_calls:.0f}", f"{c.calls_gap:+.0%}")
        p99 = (f"{c.real_p99:.1f}", f"{c.model_p99:.1f}", f"{c.p99_gap:+.0%}")
        p50 = f"{c.real_p50:.1f} / {c.model_p50:.1f}"
        rows.append((*cell, *calls, *p99, p50, extra, "yes" if c.within else "**no**"))
    columns = [
        "real figures from", "cell", "strategy", "repeats", "others' CPU", "calls real", "model", "gap",
        "p99 s real", "model", "gap", "p50 s real / model", "leave or share s, real / model", "within 15 %",
    ]  # fmt: skip
    lines += markdown_table(columns, "lllrrrrrrrrlll", rows)
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
            f"(calls {worst.calls_gap:+.0%}, p99 {worst.p99_gap:+.0%})."
        )
    return lines


def _strategy(c: Compared) -> str:
    name = STRATEGIES.get(c.strategy, c.strategy)
    return name if c.balance == "round_robin" else f"{name}, {BALANCES.get(c.balance, c.balance)}"


def _s(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"
