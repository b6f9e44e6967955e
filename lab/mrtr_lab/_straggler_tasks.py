"""`lab/mrtr_lab/straggler.py --tasks`: the same slow instance met by tasks instead of MRTR calls.

Closed-loop callers each create a `count_primes` task through the proxy and follow it to its result
(the client's default: pushed changes), over and over for the window, every answer checked. Task
slices are taken from the Redis queue by whichever worker is free, so the proxy's round robin plays no
part: what moves a task off the slow instance is the straggler rule in the task runner, and the row with
`MRTR_WORKER_STRAGGLER_RATIO=0` shows what it buys. Per task the result's `_meta` says how many slices
ran, where, and how many moves there were. The targets are the MRTR path's (issue 13 §1, "the policy applies
to task slices too"): with the rule on, tasks done >= 0.95 x and p99 <= 1.5 x the healthy run's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from benchmarks._cluster import PrimesCall, median, verdict
from benchmarks.report import markdown_table
from mrtr_client import CallResult
from mrtr_lab._tally import Tally, closed_loop
from mrtr_worker.compute.policy import SheddingSettings

COMPUTE_META = "mrtr-cluster.dev/compute"
MODES = {"straggler rule on": {}, "straggler rule off": SheddingSettings(straggler_ratio=0).environment()}
RUNS = (
    ("tasks, all healthy", "straggler rule on", False),
    ("tasks, one slow, straggler rule on", "straggler rule on", True),
    ("tasks, one slow, straggler rule off", "straggler rule off", True),
)
"""(row, cluster, throttled)."""
TASKS_TARGET, P99_TARGET = 0.95, 1.5
"""With one slow instance and the rule on: tasks done >= 0.95 x healthy and p99 <= 1.5 x healthy p99."""


@dataclass(frozen=True)
class TaskCall:
    seconds: float
    in_window: bool
    correct: bool
    moves: int
    slices: int
    on_slow: int
    """Slices of the task that ran on the slow instance (a move's own slice included)."""


class TaskRun(Tally[TaskCall]):
    """One row of task calls."""


def _task_call(meta: dict[str, Any], seconds: float, in_window: bool, correct: bool, slow: str | None) -> TaskCall:
    visited = meta.get("visited", [])
    on_slow = sum(1 for instance, *_ in visited if instance == slow)
    return TaskCall(seconds, in_window, correct, int(meta.get("moves", 0)), int(meta.get("slices", 0)), on_slow)


async def load_tasks(url: str, call: PrimesCall, callers: int, window: float, slow: str | None) -> TaskRun:
    """`callers` closed-loop task creators for `window` seconds, each task followed to its checked result."""
    run = TaskRun()

    def record(done: CallResult, seconds: float, in_window: bool, correct: bool) -> TaskCall:
        meta = (done.result.get("_meta") or {}).get(COMPUTE_META, {})
        return _task_call(meta, seconds, in_window, correct, slow)

    await closed_loop(url, call, callers, window, run, record, task=True)
    return run


def report(results: dict[str, TaskRun], call: PrimesCall, callers: int, window: float, workers: int) -> list[str]:
    lines = [
        "## Stragglers and tasks: one instance at a quarter speed, task slices with the straggler rule on and off",
        "",
        f"{callers} closed-loop callers each create a `count_primes({call.limit:,})` task ({call.steps} steps) "
        f"through the proxy of {workers} workers and follow it to its result, for {window:g} s a row; slices come "
        "from the Redis queue, so the straggler rule in the task runner (not the proxy) decides where they go. "
        "**Moves**: slices ended early on a slow instance or passed on by the one a task fled; **on slow**: "
        "the share of all slices that ran (or started) on the throttled worker.",
        "",
    ]
    rows = []
    for row, run in results.items():
        slices = sum(c.slices for c in run.calls)
        on_slow = f"{sum(c.on_slow for c in run.calls) / slices:.0%}" if slices else "-"
        stopped = f"{run.stopped_share:.0%}" if run.stopped_share is not None else "-"
        longest = max((c.seconds for c in run.calls), default=math.nan)
        times = (f"{run.p(50):.1f}", f"{run.p(90):.1f}", f"{run.p(99):.1f}", f"{longest:.1f}")
        moves, per_task = sum(c.moves for c in run.calls), f"{median([c.slices for c in run.calls]):.0f}"
        rows.append((row, run.done, *times, f"{run.wrong} / {len(run.errors)}", moves, per_task, on_slow, stopped))
    columns = [
        "run", "tasks done", "p50 s", "p90 s", "p99 s", "max s", "wrong / errors", "moves", "slices per task p50",
        "on slow", "worker stopped",
    ]  # fmt: skip
    lines += markdown_table(columns, "lrrrrrrrrrr", rows)
    healthy = results[RUNS[0][0]]
    lines += ["", "Against the healthy run (the targets apply to the rule-on row):", ""]
    for row, run in list(results.items())[1:]:
        calls, p99 = run.done / max(1, healthy.done), run.p(99) / healthy.p(99)
        target = row == RUNS[1][0]
        lines.append(
            f"* {row}: tasks done {calls:.2f} x"
            + (f" (target >= {TASKS_TARGET}: {verdict(calls >= TASKS_TARGET)})" if target else "")
            + f", p99 {p99:.2f} x"
            + (f" (target <= {P99_TARGET}: {verdict(p99 <= P99_TARGET)})" if target else "")
        )
    if any(run.wrong or run.errors for run in results.values()):
        errors = {error for run in results.values() for error in run.errors}
        lines.append(f"\n**Some tasks failed or gave a wrong answer** ({', '.join(sorted(errors)) or 'wrong'}).")
    return lines
