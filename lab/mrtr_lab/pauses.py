"""Pauses like a long garbage collection on the real cluster: each proxy balance, with and without stepping aside.

Issue 25 §4: in the fleet simulator's `gc` scenario hand-back lost to hedging,
because a pause stalls the slices under way and reads as slowness to the
worker's standing; a worker that steps aside (`MRTR_WORKER_STEP_ASIDE`) now
probes such a verdict after `PROBE_SOON` instead of `PROBE_EVERY`, until a
probe confirms it. This measures it on the real three-worker cluster, as the
balance benchmark runs its cells (a cluster per setup, started together, each
setup in turn, round after round): every worker is stopped with SIGSTOP for
`--length` s about every `--every` s (`mrtr_lab._pauses`; the same moments
for every setup of a round), closed-loop callers of `count_primes(100,000,000)`
for the window, every answer checked.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from functools import partial
from pathlib import Path

from benchmarks.report import markdown_table, parser, publish
from mrtr_lab import balance
from mrtr_lab._balance_order import Slot
from mrtr_lab._pauses import Pauses
from mrtr_lab._why_shed.fleet import Steps, Strategy, ensure, round_robin
from mrtr_lab._why_shed.scenarios import Callers, Cell, Sizes
from mrtr_lab.pages import STUDIES
from mrtr_ops.local.cluster import LocalCluster

NAME = "pauses"
SCENARIO = "pauses"
WORKERS = 3
EVERY, LENGTH = 10.0, 2.0
"""Each worker pauses 2 s about every 10 s: the study's pause (2 s, longer than the proxy's 1 s probe timeout),
three times as often, so that a 30 s cell meets about nine of them."""


def paused(cluster: LocalCluster, slot: Slot, sizes: Sizes, *, every: float, length: float, seed: int) -> Cell:
    """One cell: the load for the window while the workers pause (the schedule drawn from `seed` and the round)."""
    workers = ensure(cluster, WORKERS, Strategy.OURS)
    turned = round_robin(cluster, workers)
    pids = [cluster.workers[name].process.pid for name in workers]
    with Steps(cluster) as steps:
        plan = Pauses(pids, every=every, length=length, until=sizes.duration, seed=seed + slot.round)
        with plan, Callers(cluster.mcp_url, sizes.short, sizes.callers) as callers:
            time.sleep(sizes.duration)  # the load runs for a fixed window: nothing to wait for
        executed = steps.executed()
    cell = Cell(SCENARIO, Strategy.OURS, callers.load, sizes.short.steps, executed, round_robin=turned)
    cell.stopped_share = plan.stopped_seconds / (len(pids) * sizes.duration)
    return cell


def main() -> int:
    p = parser(__doc__, duration=30.0, duration_help="seconds of load per cell")
    balance.add_setup_options(p)
    p.add_argument(
        "--every", type=float, default=EVERY, help=f"mean seconds between a worker's pauses (default {EVERY:g})"
    )
    p.add_argument("--length", type=float, default=LENGTH, help=f"seconds a pause lasts (default {LENGTH:g})")
    p.add_argument("--seed", type=int, default=1, help="the pauses' schedule (the same seed, the same moments)")
    args = p.parse_args()
    if args.every <= 0 or args.length <= 0:
        p.error("--every and --length must be positive seconds")
    sizes = balance.sizes_of(args.duration, args.callers, args.limit)
    setups = balance.chosen_setups(p, args)
    title = f"each pauses {args.length:g} s about every {args.every:g} s"
    cell_of = partial(paused, every=args.every, length=args.length, seed=args.seed)
    work = Path(tempfile.mkdtemp(prefix="mrtr-pauses-"))
    cells: dict[tuple[str, str], list[Cell]] = {}
    measured = balance.measure(
        setups, [SCENARIO], sizes, args.repeats, work, args.trace, titles={SCENARIO: title}, cell_of=cell_of
    )
    for slot, cell in measured:
        cells.setdefault((slot.scenario, slot.balance), []).append(cell)
    shutil.rmtree(work, ignore_errors=True)
    publish(NAME, report(cells, setups, sizes, args.repeats, title), write=not args.no_report, report=STUDIES)
    bad = any(c.load.wrong or c.load.errors for runs in cells.values() for c in runs)
    return 1 if bad else 0


def report(
    cells: dict[tuple[str, str], list[Cell]], setups: list[str], sizes: Sizes, repeats: int, title: str
) -> list[str]:
    stopped = [cell.stopped_share or 0.0 for runs in cells.values() for cell in runs]
    lines = [
        "## Pauses like a long garbage collection on the real cluster",
        "",
        f"The balance benchmark's setups (three workers, hand-back on) while every worker {title.removeprefix('each ')}"
        f" (SIGSTOP of the worker and its step processes, then SIGCONT; the same moments for every setup of a "
        f"round): {sizes.callers} closed-loop callers of `count_primes({sizes.short.limit:,})` "
        f"({sizes.short.steps} steps) for {sizes.duration:g} s a cell, each setup in turn, {repeats} rounds "
        f"(figures: calls of all rounds together). The workers were stopped {min(stopped, default=0):.0%} to "
        f"{max(stopped, default=0):.0%} of the time. Every answer checked. `scripts/bench pauses`; the fleet "
        'simulator\'s `gc` scenario is in the section "Past two cores".',
        "",
    ]
    columns = ["cell", "balance", "calls completed", "p50 s", "p99 s", "max s", "wrong / errors"]
    return [*lines, *markdown_table(columns, "llrrrrr", balance.rows(cells, setups, {SCENARIO: title}))]


if __name__ == "__main__":
    raise SystemExit(main())
