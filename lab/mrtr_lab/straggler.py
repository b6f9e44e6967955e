"""Stragglers: one worker at a quarter of its speed, with the straggler rule on and off, and without shedding.

Issue 13's setup: three clusters (proxy + three workers each, one after the
other) differ only in their shedding settings: the defaults (straggler rule
on), the straggler rule off (`MRTR_WORKER_STRAGGLER_RATIO=0`) and shedding
off. On each in turn, closed-loop callers (six by default) call
`count_primes(100,000,000)` through the proxy for the measured window, every
answer checked against the known count. For the "one slow" rows a thread of
the benchmark throttles the first worker, its step pool included, to a
quarter of its speed with a SIGSTOP/SIGCONT duty cycle (25 ms running in
every 100 ms), as a noisy neighbour or a CPU-throttled container would; the
share of time they were actually stopped is printed. The healthy baseline
runs first, on the defaults.

Calls done are those complete within the window; the latency percentiles
cover every call started in it (the callers finish the calls in flight, so a
long tail is not cut off). For the slowest tenth of the calls the report says
how many finished on the slow instance, and how many of those had already
aged into priority (`priority_after_hops` ageing hand-backs) when they got
there: the cause issue 13 suspected.

`--tasks` runs the same slow instance against tasks instead of MRTR calls
(`lab/mrtr_lab/_straggler_tasks.py`), rule on and off, in its own section.
"""

from __future__ import annotations

import asyncio
import math
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from benchmarks._cluster import TOOL_PACKS, PrimesCall, median, stop_cluster, verdict
from benchmarks._throttle import THROTTLE_PERIOD, THROTTLE_RUNNING, Throttle
from benchmarks.report import markdown_table, parser, publish
from mrtr_client import CallResult
from mrtr_lab._straggler_tasks import MODES as TASK_MODES
from mrtr_lab._straggler_tasks import RUNS as TASK_RUNS
from mrtr_lab._straggler_tasks import TaskRun, load_tasks
from mrtr_lab._straggler_tasks import report as report_tasks
from mrtr_lab._tally import Tally, closed_loop
from mrtr_lab.pages import STUDIES
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_protocol.rounds import COMPLETE, HAND_BACK_REASONS, EndOfRound
from mrtr_worker.compute import primes
from mrtr_worker.compute.policy import SheddingSettings

WORKERS = 3
MODES = {
    "shedding on": {},
    "rule at slices only": SheddingSettings(straggler_at_admission=False).environment(),
    "straggler rule off": SheddingSettings(straggler_ratio=0).environment(),
    "shedding off": SheddingSettings(enabled=False).environment(),
}
RUNS = (
    ("all healthy, shedding on", "shedding on", False),
    ("one slow, shedding on (straggler rule)", "shedding on", True),
    ("one slow, straggler rule at slices only (no admission)", "rule at slices only", True),
    ("one slow, straggler rule off", "straggler rule off", True),
    ("one slow, shedding off", "shedding off", True),
)
"""(row, cluster, throttled): the healthy baseline first, then the three ways of meeting the slow instance."""
AGEING = frozenset(HAND_BACK_REASONS) - {EndOfRound.STRAGGLER}
PRIORITY_AFTER = SheddingSettings().priority_after_hops
CALLS_TARGET, P99_TARGET = 0.95, 1.5
"""Issue 13: with one slow instance, calls done >= 0.95 x healthy and p99 <= 1.5 x healthy p99."""


@dataclass(frozen=True)
class Call:
    seconds: float
    in_window: bool
    correct: bool
    hops: tuple[tuple[str | None, str], ...]
    """(instance, why the exchange ended) for every exchange of the call."""
    hop_ms: tuple[float, ...] = ()
    """How long each exchange took, in the order of `hops`."""

    def moves(self) -> int:
        return sum(reason == EndOfRound.STRAGGLER for _, reason in self.hops)

    def rounds(self) -> int:
        return sum(reason != COMPLETE for _, reason in self.hops)

    def finished_on(self) -> str | None:
        return self.hops[-1][0] if self.hops else None

    def aged_on_arrival(self) -> bool:
        """Whether the call had aged into priority when it reached the instance it finished on (for good)."""
        last = self.finished_on()
        start = len(self.hops)
        while start and self.hops[start - 1][0] == last:
            start -= 1
        return sum(reason in AGEING for _, reason in self.hops[:start]) >= PRIORITY_AFTER


@dataclass
class Run(Tally[Call]):
    slow: str | None = None


async def load(url: str, call: PrimesCall, callers: int, window: float) -> Run:
    """`callers` closed-loop callers for `window` seconds (the client's default round cap), every answer checked."""
    run = Run()

    def record(done: CallResult, seconds: float, in_window: bool, correct: bool) -> Call:
        hops = done.trace.hops
        return Call(
            seconds, in_window, correct, tuple((h.instance, h.reason) for h in hops), tuple(h.elapsed_ms for h in hops)
        )

    await closed_loop(url, call, callers, window, run, record)
    return run


@contextmanager
def cluster(env: dict[str, str], work: Path, *, redis: bool = False) -> Iterator[LocalCluster]:
    """One cluster at a time (a task store only for `--tasks`), with a patient start: on a busy two-core box it
    can take minutes."""
    config = ClusterConfig(
        workers=WORKERS, port=0, tool_packs=TOOL_PACKS, work_dir=work, worker_env=env, redis=redis, ready_timeout=300
    )
    running = LocalCluster(config)
    try:
        running.start()
        yield running
    except BaseException:
        print(f"logs kept in {work}")
        raise
    finally:
        stop_cluster(running)


def measure(cluster: LocalCluster, call: PrimesCall, callers: int, window: float, *, slow: bool) -> Run:
    if not slow:
        return asyncio.run(load(cluster.mcp_url, call, callers, window))
    instance = next(iter(cluster.workers))
    with Throttle(cluster.workers[instance].process.pid) as throttle:
        run = asyncio.run(load(cluster.mcp_url, call, callers, window))
    run.stopped_share, run.slow = throttle.stopped_share, instance
    return run


def measure_tasks(cluster: LocalCluster, call: PrimesCall, callers: int, window: float, *, slow: bool) -> TaskRun:
    """The `--tasks` row: as `measure`, with tasks followed to their results instead of MRTR calls."""
    if not slow:
        return asyncio.run(load_tasks(cluster.mcp_url, call, callers, window, None))
    instance = next(iter(cluster.workers))
    with Throttle(cluster.workers[instance].process.pid) as throttle:
        run = asyncio.run(load_tasks(cluster.mcp_url, call, callers, window, instance))
    run.stopped_share = throttle.stopped_share
    return run


def main_tasks(call: PrimesCall, callers: int, window: float, *, write: bool) -> int:
    results: dict[str, TaskRun] = {}
    work = Path(tempfile.mkdtemp(prefix="mrtr-bench-"))
    for index, (mode, env) in enumerate(TASK_MODES.items()):
        with cluster(env, work / f"t{index}", redis=True) as running:
            for row, row_mode, slow in TASK_RUNS:
                if row_mode == mode:
                    results[row] = measure_tasks(running, call, callers, window, slow=slow)
    shutil.rmtree(work, ignore_errors=True)
    publish("straggler-tasks", report_tasks(results, call, callers, window, WORKERS), write=write, report=STUDIES)
    return 1 if any(run.wrong or run.errors for run in results.values()) else 0


def main() -> int:
    options = parser(__doc__, duration=45.0, duration_help="seconds of load per row")
    options.add_argument("--callers", type=int, default=6, help="closed-loop callers (default 6)")
    options.add_argument(
        "--limit", type=int, default=100_000_000, choices=sorted(primes.KNOWN_COUNTS), help="count_primes limit"
    )
    options.add_argument(
        "--quick", action="store_true", help="only the defaults' cluster: the healthy and straggler-rule rows (smoke)"
    )
    options.add_argument(
        "--tasks", action="store_true", help="tasks instead of MRTR calls: its own section (straggler-tasks)"
    )
    options.add_argument(
        "--trace", type=int, default=0, metavar="N", help="print the N slowest calls of each row, hop by hop"
    )
    args = options.parse_args()
    call = PrimesCall(args.limit, primes.DEFAULT_SEGMENT)
    if args.tasks:
        return main_tasks(call, args.callers, args.duration, write=not args.no_report)
    results: dict[str, Run] = {}
    work = Path(tempfile.mkdtemp(prefix="mrtr-bench-"))
    for index, (mode, env) in enumerate(list(MODES.items())[: 1 if args.quick else None]):
        with cluster(env, work / f"c{index}") as running:
            for row, row_mode, slow in RUNS:
                if row_mode == mode:
                    results[row] = measure(running, call, args.callers, args.duration, slow=slow)
    shutil.rmtree(work, ignore_errors=True)
    for row, run in results.items() if args.trace else ():
        print("\n".join(trace(row, run, args.trace)), end="\n\n")
    publish("straggler", report(results, call, args.callers, args.duration), write=not args.no_report, report=STUDIES)
    return 1 if any(run.wrong or run.errors for run in results.values()) else 0


def report(results: dict[str, Run], call: PrimesCall, callers: int, window: float) -> list[str]:
    lines = [
        "## Stragglers: one instance at a quarter speed, with the straggler rule on and off",
        "",
        f"{callers} closed-loop callers of `count_primes({call.limit:,})` ({call.steps} steps) through the proxy "
        f"of {WORKERS} workers for {window:g} s a row; in the slow rows a duty cycle of SIGSTOP/SIGCONT keeps one "
        f"worker and its step pool running {THROTTLE_RUNNING:.0%} of every {THROTTLE_PERIOD * 1000:.0f} ms. "
        "Four clusters differ only in settings: defaults (straggler rule on: a slow instance hands rounds on at "
        "admission once it has learned it is slow, and any instance moves a call after a measured slow slice), "
        "`MRTR_WORKER_STRAGGLER_AT_ADMISSION=false` (the per-slice rule only), `MRTR_WORKER_STRAGGLER_RATIO=0`, "
        "`MRTR_WORKER_SHEDDING=false`. **Calls done**: complete and exact within the window; percentiles cover "
        "every call started in it; the client keeps its default cap of 32 rounds; **moves**: straggler hand-backs.",
        "",
    ]
    rows = []
    for row, run in results.items():
        rounds = [call.rounds() for call in run.calls]
        stopped = f"{run.stopped_share:.0%}" if run.stopped_share is not None else "-"
        longest = max((c.seconds for c in run.calls), default=math.nan)
        times = (f"{run.p(50):.1f}", f"{run.p(90):.1f}", f"{run.p(99):.1f}", f"{longest:.1f}")
        per_call = f"{median(rounds):.0f} / {max(rounds, default=0)}"
        moves = sum(c.moves() for c in run.calls)
        rows.append((row, run.done, *times, f"{run.wrong} / {len(run.errors)}", moves, per_call, stopped))
    columns = [
        "run", "calls done", "p50 s", "p90 s", "p99 s", "max s", "wrong / errors", "moves",
        "rounds per call p50 / max", "worker stopped",
    ]  # fmt: skip
    lines += markdown_table(columns, "lrrrrrrrlr", rows)
    healthy = results[RUNS[0][0]]
    lines += ["", "Against the healthy run (issue 13's targets apply to the straggler rule's row):", ""]
    for row, run in list(results.items())[1:]:
        calls, p99 = run.done / max(1, healthy.done), run.p(99) / healthy.p(99)
        target = row == RUNS[1][0]
        lines.append(
            f"* {row}: calls done {calls:.2f} x"
            + (f" (target >= {CALLS_TARGET}: {verdict(calls >= CALLS_TARGET)})" if target else "")
            + f", p99 {p99:.2f} x"
            + (f" (target <= {P99_TARGET}: {verdict(p99 <= P99_TARGET)})" if target else "")
            + f"; {_tail(run)}"
        )
    errors = {error for run in results.values() for error in run.errors}
    if any(run.wrong or run.errors for run in results.values()):
        lines.append(f"\n**Some calls failed or gave a wrong answer** ({', '.join(sorted(errors)) or 'wrong'}).")
    return lines


def trace(row: str, run: Run, slowest: int) -> list[str]:
    """The `slowest` calls of a row, hop by hop: instance (S: the slow one, W: healthy), why it ended, ms."""
    names: dict[str | None, str] = {None: "-"}
    if run.slow is not None:
        names[run.slow] = "S"

    def name(instance: str | None) -> str:
        return names.setdefault(instance, f"W{len(names) - 1 if run.slow is not None else len(names)}")

    lines = [f"{row}: the {slowest} slowest calls (instance:reason:ms per hop)"]
    for call in sorted(run.calls, key=lambda c: -c.seconds)[:slowest]:
        hops = " ".join(f"{name(i)}:{reason}:{ms:.0f}" for (i, reason), ms in zip(call.hops, call.hop_ms, strict=False))
        lines.append(f"  {call.seconds:5.2f} s  {hops}")
    return lines


def _tail(run: Run) -> str:
    """Where the slowest tenth of the calls finished, and whether they had aged into priority before."""
    tail = sorted(run.calls, key=lambda call: call.seconds)[-max(1, len(run.calls) // 10) :] if run.calls else []
    on_slow = [call for call in tail if call.finished_on() == run.slow]
    aged = sum(call.aged_on_arrival() for call in on_slow)
    return (
        f"slowest tenth ({len(tail)} calls): {len(on_slow)} finished on the slow instance, "
        f"{aged} of them already prioritized (>= {PRIORITY_AFTER} ageing hand-backs) when they got there"
    )


if __name__ == "__main__":
    raise SystemExit(main())
