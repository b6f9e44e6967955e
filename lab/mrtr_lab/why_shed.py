"""Why shed: checkpoint shedding against the two ways servers are run today, in three scenarios, in one run.

Issue 13 §2. One proxy; for each scenario and strategy a set of workers
with the strategy's settings (the idle workers of the cell before are
reused when they have them), the same load, every answer checked against
the known count of `count_primes`:

* scenarios: (a) one instance at a quarter speed (a SIGSTOP/SIGCONT duty
  cycle, as in `straggler.py`); (b) a rolling upgrade of all three
  instances (a v2 worker joins, then an old one leaves, one at a time)
  under a load of long calls (over 20 s of work each, one caller per
  instance), measured until every call the upgrade caught has finished;
  (c) a scale-out from two instances to four in the middle of an overload;
* strategies: **checkpoint shedding** (the defaults); **stay where you
  land** (`MRTR_WORKER_SHEDDING=false`; a leaving instance is taken out of
  rotation and waits for its calls, as a graceful shutdown does); **kill
  and start over** (shedding off; a leaving instance gets a grace period,
  then SIGKILL, and the client calls again from the start after its 502).
  In (a) and (c) no instance leaves, so the last two would be the same
  run: only stay is measured there.

**Lost steps** are steps the workers computed (their counters, a departed
worker's read just before it left) beyond those the completed answers
needed (calls x steps per call). **Upgrade**: from the first
replacement's start to the last old instance gone, and (in brackets) the
part the old instances took to leave, which is what the strategies change
(starting the new ones costs all of them the same). **Share**: seconds
from the scale-out until the two new instances ran at least 90 % of their
fair half of the steps over a one-second window.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from benchmarks._cluster import TOOL_PACKS, PrimesCall, stop_cluster, verdict
from benchmarks.report import REPORT, markdown_table, parser, publish
from mrtr_lab._why_shed.accounting import longest_in_flight
from mrtr_lab._why_shed.fleet import Strategy
from mrtr_lab._why_shed.scenarios import SCENARIOS, Cell, Sizes, run, trace
from mrtr_lab.pages import STUDIES
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_worker.compute import primes

NAME = "why-shed"
PICTURE = REPORT.parent / "why-shed.png"
NOBODY_LEAVES = "ac"
"""No instance leaves in (a) or (c), so kill and start over would be stay where you land, run twice."""
STRATEGIES = {"ours": Strategy.OURS, "stay": Strategy.STAY, "kill": Strategy.KILL}
UPGRADE_RATIO_TARGET = 0.10
SHARE_TARGET_SECONDS = 2.0
LB_ENV = {"MRTR_LB_READ_TIMEOUT": "900"}
"""A call that stays where it landed may wait minutes for its answer: the proxy must not answer 504 first."""


def options() -> argparse.ArgumentParser:
    known = sorted(primes.KNOWN_COUNTS)
    p = parser(__doc__, duration=30.0, duration_help="seconds of load in (a), and in (c) after the scale-out")
    p.add_argument("--scenarios", default="abc", help="which scenarios, e.g. 'bc' (default abc)")
    p.add_argument("--strategies", default="ours,stay,kill", help="comma-separated subset of ours,stay,kill")
    p.add_argument("--callers", type=int, default=6, help="closed-loop callers in (a) (default 6)")
    p.add_argument(
        "--long-callers", type=int, default=3, help="closed-loop callers in (b): one call per instance (default 3)"
    )
    p.add_argument("--overload", type=int, default=12, help="closed-loop callers in (c) (default 12)")
    p.add_argument("--limit", type=int, default=100_000_000, choices=known, help="count_primes limit in (a), (c)")
    p.add_argument(
        "--long-limit", type=int, default=2_000_000_000, choices=known, help="count_primes limit in (b), >= 20 s"
    )
    p.add_argument("--warmup", type=float, default=10.0, help="seconds of overload before the scale-out (default 10)")
    p.add_argument(
        "--upgrade-window",
        type=float,
        default=100.0,
        help="(b): seconds of load from its start, at least until the calls it caught are done (default 100)",
    )
    p.add_argument(
        "--no-rebalance",
        action="store_true",
        help="the proxy does not tell the old instances of new ones, for the whole run (the old way; matters in (c))",
    )
    p.add_argument("--grace", type=float, default=2.0, help="kill and start over: grace before SIGKILL (default 2)")
    p.add_argument("--drain-timeout", type=float, default=600.0, help="stay: longest wait for a leaving instance")
    p.add_argument("--report-file", type=Path, default=STUDIES, help="where the section goes (default the docs)")
    p.add_argument(
        "--picture", type=Path, help=f"the PNG, written even with --no-report (default {PICTURE}, not with --no-report)"
    )
    p.add_argument("--trace", type=int, default=0, metavar="N", help="print each cell's N slowest calls, hop by hop")
    return p


def main() -> int:
    args = options().parse_args()
    sizes = Sizes(
        duration=args.duration,
        short=PrimesCall(args.limit, primes.DEFAULT_SEGMENT),
        long=PrimesCall(args.long_limit, primes.DEFAULT_SEGMENT),
        callers=args.callers,
        overload=args.overload,
        warmup=args.warmup,
        grace=args.grace,
        drain_timeout=args.drain_timeout,
        upgrade_window=args.upgrade_window,
        long_callers=args.long_callers,
        rebalance=not args.no_rebalance,
    )
    strategies = [STRATEGIES[name.strip()] for name in args.strategies.split(",")]
    cells = measure([s for s in SCENARIOS if s in args.scenarios], strategies, sizes)
    for cell in cells if args.trace else ():
        print("\n".join(trace(cell, args.trace)))
    publish(NAME, report(cells, sizes), write=not args.no_report, report=args.report_file)
    if not args.no_report or args.picture is not None:
        from mrtr_lab._why_shed.chart import draw

        draw(cells, args.picture or PICTURE)
        print(f"picture written to {args.picture or PICTURE}")
    return 1 if any(cell.load.wrong or cell.load.errors for cell in cells) else 0


def measure(scenarios: list[str], strategies: list[Strategy], sizes: Sizes) -> list[Cell]:
    """Every cell on one proxy, one after the other (fresh workers for each)."""
    work = Path(tempfile.mkdtemp(prefix="mrtr-bench-"))
    first = strategies[0]  # the first cell's workers are the cluster's own
    config = ClusterConfig(
        workers=3 if scenarios[0] in "ab" else 2,
        port=0,
        tool_packs=TOOL_PACKS,
        work_dir=work,
        worker_env=first.worker_env,
        redis=False,
        ready_timeout=300,
        lb_env=LB_ENV if sizes.rebalance else {**LB_ENV, "MRTR_LB_REBALANCE_ON_JOIN": "false"},
    )
    cluster = LocalCluster(config)
    cells: list[Cell] = []
    try:
        cluster.start()
        for scenario in scenarios:  # a scenario's cells side by side in time: a busy machine drifts
            for strategy in strategies:
                if scenario in NOBODY_LEAVES and strategy is Strategy.KILL:
                    continue  # the same settings and the same run as stay where you land
                print(f"({scenario}) {SCENARIOS[scenario]}: {strategy.value} ...", flush=True)
                cells.append(run(cluster, scenario, strategy, sizes))
    except BaseException:
        print(f"logs kept in {work}")
        raise
    finally:
        stop_cluster(cluster)
    shutil.rmtree(work, ignore_errors=True)
    return cells


def report(cells: list[Cell], sizes: Sizes) -> list[str]:
    lines = [
        "## Why shed: checkpoint shedding, staying where you land, killing and starting over",
        "",
        "One proxy; each cell's workers have its strategy's settings (idle ones of the cell before are reused). "
        f"(a) {sizes.callers} closed-loop callers of "
        f"`count_primes({sizes.short.limit:,})` ({sizes.short.steps} steps) for {sizes.duration:g} s, one of three "
        f"workers at a quarter speed; (b) {sizes.long_callers} callers (one per instance) of "
        f"`count_primes({sizes.long.limit:,})` ({sizes.long.steps} steps, over 20 s of work each) for "
        f"{sizes.upgrade_window:g} s from the start of an upgrade replacing each of three workers by a v2 one, one "
        "at a time (longer while the upgrade lasts, and until every call in flight at its start has finished); (c) "
        f"{sizes.overload} callers of `count_primes({sizes.short.limit:,})` on two workers, two more added after "
        f"{sizes.warmup:g} s ({_told(sizes)}), then {sizes.duration:g} s more. Stay where you land: shedding off, a "
        f"leaving worker waits for its calls; kill and start over: shedding off, SIGKILL after {sizes.grace:g} s, "
        "the client calls again from the start. **Lost steps**: steps the workers ran beyond completed calls x steps "
        "per call. "
        "**Upgrade s**: from the first replacement's start to the last old instance gone, in brackets the part the "
        "old instances took to leave (what the strategies change; starting the new ones costs the same for all). "
        "**Share**: seconds from the scale-out until the new instances ran >= 90 % of their half of the steps "
        "over one second. Every answer is checked.",
    ]
    for scenario, title in SCENARIOS.items():
        mine = [cell for cell in cells if cell.scenario == scenario]
        if mine:
            lines += ["", f"### ({scenario}) {title}", "", *_table(mine)]
    lines += ["", "Targets (issue 13):", "", *_targets(cells)]
    if any(cell.load.wrong or cell.load.errors for cell in cells):
        errors = sorted({e for cell in cells for e in cell.load.errors}) or ["wrong answers"]
        lines.append(f"\n**Some calls failed or gave a wrong answer** ({', '.join(errors)}).")
    return lines


def _table(cells: list[Cell]) -> list[str]:
    rows = []
    for cell in cells:
        longest = max((call.seconds for call in cell.load.calls), default=float("nan"))
        upgrade = "-" if cell.upgrade_seconds is None else f"{cell.upgrade_seconds:.1f} ({cell.leaving_seconds:.1f})"
        share = "-" if cell.scenario != "c" else _seconds(cell.share_seconds, unit="")
        rows.append(
            (
                cell.strategy.value,
                cell.load.completed,
                f"{cell.p(50):.1f}",
                f"{cell.p(99):.1f}",
                f"{longest:.1f}",
                f"{cell.lost:.0f}",
                f"{cell.load.wrong} / {len(cell.load.errors)}",
                upgrade,
                share,
            )
        )
    columns = [
        "strategy", "calls completed", "p50 s", "p99 s", "max s", "lost steps", "wrong / errors",
        "upgrade s (leaving)", "share s",
    ]  # fmt: skip
    return markdown_table(columns, "lrrrrrrrr", rows)


def _targets(cells: list[Cell]) -> list[str]:
    found = {(cell.scenario, cell.strategy): cell for cell in cells}
    lines = []
    ours, stay, kill = (found.get(("b", s)) for s in (Strategy.OURS, Strategy.STAY, Strategy.KILL))
    if ours is not None and ours.lost < 0:
        lines.append(
            f"* (b) lost steps below zero ({ours.lost:.0f}): a drained instance exits as soon as it is idle, and "
            "its last counter read can miss the step each slot was finishing (at most one per slot and departure)"
        )
    if ours is not None and stay is not None and ours.leaving_seconds and stay.leaving_seconds:
        ratio = ours.leaving_seconds / stay.leaving_seconds
        total = (ours.upgrade_seconds or 0.0) / (stay.upgrade_seconds or 1.0)
        lines.append(
            f"* (b) our old instances took {ratio:.1%} of stay-where-you-land's time to leave (target < "
            f"{UPGRADE_RATIO_TARGET:.0%}: {verdict(ratio < UPGRADE_RATIO_TARGET)}; the whole upgrade, starting the "
            f"new instances included, {total:.1%}), losing {ours.lost:.0f} steps (target 0: {verdict(ours.lost <= 0)})"
        )
    if kill is not None:
        worth = kill.lost / kill.steps_per_call
        lines.append(f"* (b) kill and start over threw away {kill.lost:.0f} steps ({worth:.1f} calls' worth)")
    ours, stay = found.get(("c", Strategy.OURS)), found.get(("c", Strategy.STAY))
    if ours is not None:
        met = ours.share_seconds is not None and ours.share_seconds <= SHARE_TARGET_SECONDS
        lines.append(
            f"* (c) the new instances carried their share after {_seconds(ours.share_seconds)} with checkpoint "
            f"shedding (target <= {SHARE_TARGET_SECONDS:g} s: {verdict(met)})"
        )
    if stay is not None and stay.added_at is not None:
        longest = longest_in_flight([(c.started, c.seconds) for c in stay.load.calls], stay.added_at)
        lines.append(
            f"* (c) staying where they landed: after {_seconds(stay.share_seconds)}; the longest call in flight at "
            f"the scale-out still had {longest:.1f} s to run"
        )
    return lines or ["* (none of the targeted cells ran)"]


def _told(sizes: Sizes) -> str:
    if not sizes.rebalance:
        return "the old ones not told of them"
    return (
        "the proxy then telling the two old ones, `POST /admin/rebalance` on join: with shedding on, their queued "
        "calls move on"
    )


def _seconds(value: float | None, unit: str = " s") -> str:
    return "never" if value is None else f"{value:.1f}{unit}"


if __name__ == "__main__":
    raise SystemExit(main())
