"""Run the calibration check, the anchors and the study's cells (in parallel processes), and write them up."""

from __future__ import annotations

import math
import multiprocessing
import pickle
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from benchmarks.report import block
from mrtr_lab.fleet_sim import notes, tables
from mrtr_lab.fleet_sim.anchors import ANCHORS, Anchor, supermarket
from mrtr_lab.fleet_sim.calibrate import Calibration
from mrtr_lab.fleet_sim.calibration import Compared, compare, table
from mrtr_lab.fleet_sim.model import Model
from mrtr_lab.fleet_sim.strategies import GRACE_SECONDS, Strategy
from mrtr_lab.fleet_sim.study import (
    BATCH,
    GC_EVERY,
    GC_PAUSE,
    SCALE_AFTER,
    SCALE_BY,
    SCALE_WARMUP,
    SCENARIOS,
    SLOW_SHARE,
    SLOW_SPEED,
    STEPS,
    TASK_SCENARIOS,
    WARMUP,
    Cell,
    Result,
    run_cell,
)

ANCHOR_SERVERS, ANCHOR_SERVICE_TIMES = 200, 300.0
CALIBRATION_SECTION = "fleet-sim-calibration"
"""The calibration's block inside the section (`benchmarks.report.block`)."""


def run_study(
    model: Model,
    cal: Calibration,
    *,
    sizes: Sequence[int],
    loads: Sequence[float],
    largest_loads: Sequence[float] | None = None,
    task_sizes: Sequence[int] | None = None,
    scenarios: Sequence[str],
    strategies: Sequence[Strategy],
    calls: int,
    seed: int,
    jobs: int,
    seeds: int,
    anchors: bool,
    reuse: list[Result] | None = None,
    extend: bool = False,
    progress: Path | None = None,
) -> tuple[list[Result], list[Compared], list[tuple[Anchor, float, int]]]:
    """`reuse`: the cells of an earlier run, shown again instead of simulated (with `extend`, the asked cells it
    lacks are simulated beside them); `progress`: where the cells done so far are pickled with the model after
    each one (a run cut short can still be written up with `--reuse-study`); `task_sizes`: the sizes the task
    scenarios run at (None: all), since the model's one Redis saturates past about a hundred instances."""
    biggest = max(sizes)
    cells = [
        Cell(s, n, x, strategy)
        for s in scenarios
        for n in sizes
        for x in (largest_loads if largest_loads is not None and n == biggest else loads)
        for strategy in strategies
        if strategy.tasks == (s in TASK_SCENARIOS)  # task work under the task strategies, MRTR calls under the rest
        and (s not in TASK_SCENARIOS or task_sizes is None or n in task_sizes)
    ]
    kept = list(reuse) if reuse is not None else []
    had = {r.cell for r in kept}
    cells = [c for c in cells if c not in had] if extend else [] if reuse is not None else cells
    cells.sort(key=lambda c: c.size)  # the small ones first: a run cut short has whole grids to show
    with ProcessPoolExecutor(max(1, jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(run_cell, model, cell, calls, seed) for cell in cells]
        found = pool.map(_anchor, ANCHORS) if anchors else iter(())
        compared = compare(cal, seeds) if cal.reference else []
        results = []
        for cell, future in zip(cells, futures, strict=True):
            results.append(future.result())
            if progress is not None:
                progress.parent.mkdir(parents=True, exist_ok=True)
                progress.write_bytes(pickle.dumps((model, [*kept, *results])))
            f = results[-1].figures
            print(
                f"{cell.scenario} {cell.size} {cell.load} {cell.strategy.key}: {f.calls} calls, "
                f"p99.9 {f.p999:.2f} s, lost {f.lost_steps}",
                flush=True,
            )
        done_anchors = list(found)
    return [*kept, *results], compared, done_anchors


def _older(model: Model, cal: Calibration) -> list[str]:
    """A word when the study's cells were simulated with a calibration other than the one the table below uses."""
    now = Model.from_calibration(cal)
    if math.isclose(now.step_mean, model.step_mean, rel_tol=1e-6):
        return []
    return [
        "",
        f"The study's cells were simulated with the calibration of their day (a step of {model.step_mean * 1000:.1f} "
        f"ms); the calibration below is the current one (a step of {now.step_mean * 1000:.1f} ms).",
    ]


def _anchor(anchor: Anchor) -> tuple[Anchor, float, int]:
    mean, counted = supermarket(anchor, ANCHOR_SERVERS, ANCHOR_SERVICE_TIMES, seed=1)
    return anchor, mean, counted


def calibration_part(compared: Sequence[Compared], cal: Calibration, seeds: int) -> list[str]:
    """The calibration table and how the replay is built: its own block of the section, which
    `--calibration-only` writes again (new measurements) without simulating the study again."""
    model = Model.from_calibration(cal)
    return [
        "### Calibration: the real three-worker figures, real and modelled side by side",
        "",
        f"The model of this table: the short call's step {model.step_mean * 1000:.1f} ms two at once and "
        f"{model.crowded_step_mean * 1000:.1f} ms six at once, the long call's "
        f"{model.crowded_long_step_mean * 1000:.1f} ms three at once; per hop {model.client_hop * 1000:.2f} ms "
        f"client, {model.proxy_hop * 1000:.2f} ms proxy, {model.worker_hop * 1000:.2f} ms worker, a worker's "
        f"start-up {model.start_cpu:.1f} s of CPU, all from `calibration.json` (the study's cells keep the "
        "calibration they were simulated with: the section's first paragraph names it).",
        "",
        *(table(list(compared), cal, seeds) if compared else ["(no reference figures in the calibration file)"]),
        "",
        *notes.model_of_the_cluster(cal, compared),
    ]


def section(
    results: Sequence[Result],
    compared: Sequence[Compared],
    anchors: Sequence[tuple[Anchor, float, int]],
    cal: Calibration,
    model: Model,
    calls: int,
    seeds: int,
    seconds: float,
) -> list[str]:
    lines = [
        "## Past two cores: the shedding policy at a thousand instances (fleet simulator)",
        "",
        "A discrete-event model of the fleet (`lab/mrtr_lab/fleet_sim/`, SimPy) that drives the real policy objects "
        "(`SheddingPolicy.arrives` and `at_step_end`, the instance's `Standing`, the task "
        "runner's `SliceRules`) and the real proxy's pool and pickers (`mrtr_lb.backends`, `mrtr_lb.balancing`), "
        "with the client's retry rules "
        "and every cost measured on the real cluster by `lab/mrtr_lab/fleet_sim/calibrate.py`. The study below ran "
        f"with: a step {model.step_mean * 1000:.1f} ms of CPU with two stepping at once (spread "
        f"{model.step_cv:.0%}), plus {model.worker_step * 1000:.2f} "
        f"ms in the worker's main process; per hop {model.client_hop * 1000:.2f} ms client, "
        f"{model.proxy_hop * 1000:.2f} ms proxy, {model.worker_hop * 1000:.2f} ms worker (a first round "
        f"{model.worker_first * 1000:.1f} ms); a worker's start-up {model.start_cpu:.1f} s of CPU. "
        f"Computing this section took {seconds / 60:.0f} min (the study's cells are kept and can be reused).",
        *_older(model, cal),
        "",
        block(CALIBRATION_SECTION, "\n".join(calibration_part(compared, cal, seeds))),
    ]
    if anchors:
        lines += [
            "",
            "### Anchor: the supermarket model",
            "",
            *tables.anchors(anchors, ANCHOR_SERVERS, ANCHOR_SERVICE_TIMES),
        ]
    if results:
        total = sum(r.figures.calls for r in results)
        rounds = [r for r in results if not r.cell.strategy.tasks]
        tasks = [r for r in results if r.cell.strategy.tasks]
        lines += [
            "",
            "### The study",
            "",
            f"Each instance has two compute slots on two cores of its own (the worker's defaults); calls of {STEPS} "
            "steps arrive as a Poisson stream at the load times what the instances in rotation can step. "
            f"Scenarios: **slow**, {SLOW_SHARE:.0%} of the instances (at least one) at {SLOW_SPEED:g} of the speed; "
            f"**gc**, every instance pauses {GC_PAUSE:g} s about every {GC_EVERY:g} s (the proxy's probes time out, "
            f"it leaves the rotation, and after two failed probes its requests are answered 504); **upgrade**, "
            f"every instance replaced in batches of {BATCH:.0%} (new ones start and join, then as many old ones "
            f"leave: hand-back drains them, the others leave as a graceful shutdown, waiting up to "
            f"{GRACE_SECONDS:g} s for their calls before a kill); **scale-out**, {SCALE_BY:.0%} more instances join "
            f"after {SCALE_WARMUP:g} s at a rate set for the larger fleet (so at 0.9 and 0.95 the smaller one is "
            f"overloaded until then), calls counted for {SCALE_WARMUP + SCALE_AFTER:g} s. The steady scenarios warm "
            f"up {WARMUP:g} s and count about {calls:,} calls; the others repeat the event with new seeds until they "
            f"count as many (**runs**). **slow-tasks**: the slow scenario's fleet with the calls created as tasks "
            "(20 steps each; one Redis; slices of 1000 ms pulled by the workers), the straggler rule of the task "
            "runner on and off (`MRTR_WORKER_STRAGGLER_RATIO=0`); a task's latency runs from its creation to its "
            "result pushed to the client, and its **hand-backs per call** are its slices ended before its last. "
            f"{total:,} counted calls in all; p99.9 of n calls is about the n/1000-th "
            "slowest, so read it with the call count beside it. **Steps lost**: steps run for the counted calls "
            "beyond those their answers needed (a hedge's loser, a killed or abandoned round). **Share s**: "
            "seconds until the new instances ran 90 % of their fair share of the steps.",
            *(["", *cover] if (cover := notes.coverage(results)) else []),
            "",
            "p99.9 call latency in seconds (best of each row in bold):",
            "",
            *tables.summary(rounds),
            *(["", "With the work as task slices:", "", *tables.summary(tasks)] if tasks else []),
            "",
            "What it says:",
            "",
            *tables.verdicts(rounds),
            *tables.task_verdicts(tasks),
        ]
        for scenario, title in SCENARIOS.items():
            if any(r.cell.scenario == scenario for r in results):
                lines += ["", f"#### {scenario}: {title}", "", *tables.detail(results, scenario)]
        lines += ["", "![p99.9 by strategy, load and fleet size](fleet-sim.png)"]
    return [*lines, "", *notes.slices(cal)]
