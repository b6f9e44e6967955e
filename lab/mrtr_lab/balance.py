"""The proxy's balance on the real cluster: round robin against two choices (and least request), with hand-back.

Issue 25 §4: the fleet simulator said two choices beats round robin under
hand-back (`scripts/bench fleet-sim`); this measures it on the real
three-worker cluster, and round robin and least request with slow workers
stepping aside (`MRTR_WORKER_STEP_ASIDE`; `mrtr_lab._balance_setups`). One cluster per
setup (`MRTR_LB_BALANCE`), the workers' defaults (hand-back on) but for the
step-aside switch, started together; the cells run one after the other,
each setup in turn, so a busy machine drifts over all alike: healthy, and
one worker at a quarter speed (the why-shed and straggler benchmarks' duty
cycle), closed-loop callers of `count_primes(100,000,000)` for the window,
every answer checked.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from benchmarks._cluster import TOOL_PACKS, PrimesCall, stop_cluster
from benchmarks.report import markdown_table, parser, publish
from mrtr_lab._balance_order import Slot, schedule
from mrtr_lab._balance_setups import SETUPS, setup_of
from mrtr_lab._why_shed.fleet import Steps, Strategy, ensure, round_robin
from mrtr_lab._why_shed.scenarios import Callers, Cell, Sizes, run, trace
from mrtr_lab.pages import STUDIES
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.percentiles import percentile
from mrtr_worker.compute import primes

NAME = "balance"
BALANCES = SETUPS
"""The setups run by default: each a balance, and round robin once more with slow workers stepping aside."""
SCENARIOS = {"healthy": "all healthy", "a": "one at a quarter speed"}


def sizes_of(duration: float = 30.0, callers: int = 6, limit: int = 100_000_000) -> Sizes:
    """A cell's load: `callers` closed-loop callers of `count_primes(limit)` for `duration` seconds."""
    short = PrimesCall(limit, primes.DEFAULT_SEGMENT)
    return Sizes(duration, short, short, callers, 0, 0.0, 2.0, 600.0)


def _healthy(cluster: LocalCluster, sizes: Sizes) -> Cell:
    workers = ensure(cluster, 3, Strategy.OURS)
    turned = round_robin(cluster, workers)
    with Steps(cluster) as steps:
        with Callers(cluster.mcp_url, sizes.short, sizes.callers) as callers:
            time.sleep(sizes.duration)  # the load runs for a fixed window: nothing to wait for
        executed = steps.executed()
    return Cell("healthy", Strategy.OURS, callers.load, sizes.short.steps, executed, round_robin=turned)


def run_slot(cluster: LocalCluster, slot: Slot, sizes: Sizes) -> Cell:
    """One of this benchmark's cells: all healthy, or (a) one worker at a quarter speed."""
    return _healthy(cluster, sizes) if slot.scenario == "healthy" else run(cluster, "a", Strategy.OURS, sizes)


def measure(
    balances: list[str],
    scenarios: list[str],
    sizes: Sizes,
    repeats: int,
    work: Path,
    slowest: int = 0,
    *,
    titles: Mapping[str, str] = SCENARIOS,
    cell_of: Callable[[LocalCluster, Slot, Sizes], Cell] = run_slot,
) -> list[tuple[Slot, Cell]]:
    """Every cell in `schedule` order, each balance on a cluster of its own started first (in `work`, kept if
    the run fails); `slowest` > 0 prints each cell's slowest calls, hop by hop. `cell_of` runs one cell (the
    pause benchmark's its own scenario, `titles` its name)."""
    started: dict[str, LocalCluster] = {}
    cells: list[tuple[Slot, Cell]] = []
    try:
        for balance in balances:
            setup = setup_of(balance)
            config = ClusterConfig(
                workers=3,
                port=0,
                tool_packs=TOOL_PACKS,
                work_dir=work / balance,
                redis=False,
                ready_timeout=300,
                lb_env=setup.lb_env,
                worker_env=setup.worker_env,
            )
            started[balance] = LocalCluster(config).start()
        for slot in schedule(balances, scenarios, repeats):
            print(f"[{slot.round + 1}/{repeats}] {titles[slot.scenario]}: {slot.balance} ...", flush=True)
            cell = cell_of(started[slot.balance], slot, sizes)
            cells.append((slot, cell))
            if slowest:
                print("\n".join(trace(cell, slowest)), flush=True)
    except BaseException:
        print(f"logs kept in {work}")
        raise
    finally:
        for cluster in started.values():
            stop_cluster(cluster)
    return cells


def add_setup_options(p: argparse.ArgumentParser) -> None:
    """The options this benchmark shares with the pause benchmark: the load, the rounds, the setups, the traces."""
    p.add_argument("--callers", type=int, default=6, help="closed-loop callers (default 6)")
    p.add_argument("--repeats", type=int, default=2, help="rounds of every cell (default 2)")
    p.add_argument("--balances", default=",".join(BALANCES), help=f"setups, subset of {','.join(BALANCES)}")
    p.add_argument("--limit", type=int, default=100_000_000, choices=sorted(primes.KNOWN_COUNTS))
    p.add_argument("--trace", type=int, default=0, metavar="N", help="print each cell's N slowest calls, hop by hop")


def chosen_setups(p: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The setups `--balances` names (an unknown one is a usage error)."""
    setups = [b.strip() for b in args.balances.split(",")]
    for setup in setups:
        try:
            setup_of(setup)
        except ValueError as exc:
            p.error(str(exc))
    return setups


def main() -> int:
    p = parser(__doc__, duration=30.0, duration_help="seconds of load per cell")
    add_setup_options(p)
    p.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"subset of {','.join(SCENARIOS)}")
    args = p.parse_args()
    sizes = sizes_of(args.duration, args.callers, args.limit)
    balances = chosen_setups(p, args)
    scenarios = [s.strip() for s in args.scenarios.split(",")]
    if unknown := set(scenarios) - set(SCENARIOS):
        p.error(f"unknown scenarios {sorted(unknown)}: choose from {','.join(SCENARIOS)}")
    work = Path(tempfile.mkdtemp(prefix="mrtr-balance-"))
    cells: dict[tuple[str, str], list[Cell]] = {}
    for slot, cell in measure(balances, scenarios, sizes, args.repeats, work, args.trace):
        cells.setdefault((slot.scenario, slot.balance), []).append(cell)
    shutil.rmtree(work, ignore_errors=True)
    publish(NAME, report(cells, balances, sizes, args.repeats), write=not args.no_report, report=STUDIES)
    bad = any(c.load.wrong or c.load.errors for runs in cells.values() for c in runs)
    return 1 if bad else 0


def report(cells: dict[tuple[str, str], list[Cell]], balances: list[str], sizes: Sizes, repeats: int) -> list[str]:
    lines = [
        "## The proxy's balance on the real cluster: round robin, two choices, least request, stepping aside",
        "",
        f"One cluster per setup (three workers, hand-back on: the defaults), started together: a balance "
        "(`MRTR_LB_BALANCE`), `+step_aside` with the workers' `MRTR_WORKER_STEP_ASIDE=true` (a worker that "
        "knows it is slow leaves the rotation until a probe is due); "
        f"{sizes.callers} closed-loop callers of `count_primes({sizes.short.limit:,})` ({sizes.short.steps} steps) "
        f"for {sizes.duration:g} s a cell, each setup in turn, {repeats} rounds (figures: calls of all rounds "
        "together). In the slow cells one worker runs 25 ms of every 100 ms (SIGSTOP/SIGCONT). Every answer "
        'checked. The fleet simulator\'s study is in the section "Past two cores".',
        "",
    ]
    columns = ["cell", "balance", "calls completed", "p50 s", "p99 s", "max s", "wrong / errors"]
    return [*lines, *markdown_table(columns, "llrrrrr", rows(cells, balances, SCENARIOS))]


def rows(
    cells: dict[tuple[str, str], list[Cell]], balances: list[str], titles: Mapping[str, str]
) -> list[tuple[object, ...]]:
    """One row per cell and setup run (in `titles`' order, then `balances`'): the calls of all its rounds."""
    found: list[tuple[object, ...]] = []
    for scenario, title in titles.items():
        for balance in balances if any(key[0] == scenario for key in cells) else ():
            runs = cells.get((scenario, balance), [])
            seconds = sorted(call.seconds for cell in runs for call in cell.load.calls)
            completed = sum(cell.load.completed for cell in runs)
            wrong = sum(cell.load.wrong for cell in runs)
            errors = sum(len(cell.load.errors) for cell in runs)
            found.append(
                (
                    title,
                    f"`{balance}`",
                    completed,
                    f"{percentile(seconds, 50):.1f}",
                    f"{percentile(seconds, 99):.1f}",
                    f"{max(seconds, default=float('nan')):.1f}",
                    f"{wrong} / {errors}",
                )
            )
    return found


if __name__ == "__main__":
    raise SystemExit(main())
