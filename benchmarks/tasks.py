"""Tasks on the fleet: their latency, their throughput against plain MRTR calls, checkpoints and recovery.

One cluster (the proxy, three workers, one Redis), measured in one run, in
this order:

1. **Latency.** A few callers create small `count_primes` tasks through the
   proxy and follow them to their end with `mrtr_client` (polling as the
   server's `pollIntervalMs` says), while two readers read the newest task
   back to back with `tasks/get`. Creation latency is the `tools/call` that
   answers `CreateTaskResult` (sent only once the record is in Redis).
2. **Throughput.** The same closed loop of callers runs the same
   `count_primes` calls as plain MRTR calls and as tasks, windows in the
   order MRTR, tasks, tasks, MRTR so that drift on a busy machine falls on
   both. Throughput is useful steps per second (the workers' own step
   counters over the window; after each run every step is accounted for by
   a correctly completed call, or the waste is taken off), as in
   `cluster_efficiency`.
3. **Checkpoint cost.** The workers' `mrtr_worker_task_checkpoint_seconds`
   over the task windows: the write that ends every slice (seal the record,
   one Redis transaction), and its share of a slice.
4. **Recovery.** A long task is created, the instance running its slice is
   killed with SIGKILL (with its step pool) at a random point of the slice,
   and the store is watched (`benchmarks._tasks`): seconds until a survivor
   claims the slice, until it begins it (the task's next step starts there:
   issue 24 wants it within 1 s of the kill, p50 and worst over repeated
   kills), and until it writes the task again. The victim is restarted
   before the next trial.

Every answer is checked: exact prime counts, a task for every task call,
and after a recovery the exact step count.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from benchmarks._cluster import MIX, PATIENT, PrimesCall, clusters, median, steps_executed, verdict
from benchmarks._tasks import (
    PREFIX,
    Recovery,
    TaskStoreView,
    checkpoint_totals,
    cluster_cpu,
    recover_once,
)
from benchmarks.report import markdown_table, parser, publish
from mrtr_client import AsyncClient, TaskExchange
from mrtr_ops.local.cluster import LocalCluster
from mrtr_ops.percentiles import percentile
from mrtr_protocol.tasks import TASKS_GET

WORKERS = 3
SMALL = PrimesCall(1_000_000, 1_000_000)
"""The latency phase's task: one step, so the figures are the wire and the store, not the work."""
LONG = PrimesCall(100_000_000, 2_500_000)
"""The recovery phase's task: 40 steps, several slices."""
DEFAULT_LEASE_MS, DEFAULT_SLICE_MS = 5_000, 1_000
"""The worker's defaults (`MRTR_WORKER_TASK_LEASE_MS`, `_TASK_SLICE_MS`)."""
TARGET_RATIO = 0.9
NEXT_STEP_TARGET_S = 1.0
"""The next step of a killed worker's task starts elsewhere within this many seconds of the kill (issue 24 §3)."""

OneCall = Callable[[PrimesCall], Awaitable[bool]]


@dataclass
class Latency:
    created_ms: list[float] = field(default_factory=list)
    get_ms: list[float] = field(default_factory=list)
    echo_ms: list[float] = field(default_factory=list)
    """A trivial plain call (`echo`) at the same moment: what any request costs through the proxy right now."""
    tasks: int = 0
    errors: int = 0


@dataclass
class Run:
    """One closed loop: its measured window, and the whole run (warm-up and tail) for the waste check."""

    seconds: float = 0.0
    window_steps: float = 0.0
    calls: int = 0
    """Calls completed correctly inside the window."""
    errors: int = 0
    run_executed: float = 0.0
    run_useful: int = 0
    latencies: list[float] = field(default_factory=list)
    checkpoint_seconds: float = 0.0
    checkpoints: float = 0.0
    cpu_seconds: float = 0.0
    """CPU the cluster (proxy, workers with their step pools, Redis) used in the window."""
    window_rates: list[float] = field(default_factory=list)

    @property
    def per_cpu_second(self) -> float:
        """Useful steps per CPU-second of the cluster: less sensitive than steps/s to how much of the machine
        other work took."""
        return self.rate * self.seconds / self.cpu_seconds if self.cpu_seconds else 0.0

    @property
    def wasted(self) -> float:
        return self.run_executed - self.run_useful

    @property
    def rate(self) -> float:
        """Useful steps per second in the window: steps run, less any waste."""
        return max(0.0, self.window_steps - max(0.0, self.wasted)) / self.seconds if self.seconds else 0.0

    def merge(self, other: Run) -> Run:
        return Run(
            self.seconds + other.seconds,
            self.window_steps + other.window_steps,
            self.calls + other.calls,
            self.errors + other.errors,
            self.run_executed + other.run_executed,
            self.run_useful + other.run_useful,
            self.latencies + other.latencies,
            self.checkpoint_seconds + other.checkpoint_seconds,
            self.checkpoints + other.checkpoints,
            self.cpu_seconds + other.cpu_seconds,
            self.window_rates + other.window_rates,
        )


async def measure_latency(cluster: LocalCluster, callers: int, duration: float) -> Latency:
    """Small tasks created and followed by `callers`, two readers reading the newest one back to back, and one
    caller of `echo` beside them for comparison."""
    found = Latency()
    newest: list[str] = []
    end = time.monotonic() + duration

    def seen(exchange: TaskExchange) -> None:
        if exchange.detail == "created":
            newest.append(exchange.task_id)

    async with AsyncClient(cluster.mcp_url, policy=PATIENT) as client:

        async def caller() -> None:
            while time.monotonic() < end:
                try:
                    done = await client.call_tool("count_primes", SMALL.arguments, task=True, on_task=seen)
                except Exception:  # counted, never allowed to stop the benchmark
                    found.errors += 1
                    continue
                found.tasks += 1
                found.errors += 0 if done.task_id is not None and SMALL.correct(done) else 1
                for exchange in done.trace.task_exchanges:
                    if exchange.detail == "created":
                        found.created_ms.append(exchange.elapsed_ms)
                    elif exchange.method == TASKS_GET:
                        found.get_ms.append(exchange.elapsed_ms)

        async def reader() -> None:
            while time.monotonic() < end:
                if not newest:
                    await asyncio.sleep(0.01)
                    continue
                task_id = newest[-1]
                started = time.perf_counter()
                try:
                    snapshot = await client.get_task(task_id)
                except Exception:
                    found.errors += 1
                    continue
                found.get_ms.append((time.perf_counter() - started) * 1000)
                found.errors += 0 if snapshot.task_id == task_id else 1

        async def echo() -> None:
            while time.monotonic() < end:
                started = time.perf_counter()
                try:
                    done = await client.call_tool("echo", {"text": "latency"})
                except Exception:
                    found.errors += 1
                    continue
                found.echo_ms.append((time.perf_counter() - started) * 1000)
                found.errors += 0 if done.task_id is None and not done.result.get("isError") else 1

        await asyncio.gather(*(caller() for _ in range(callers)), reader(), reader(), echo())
    return found


async def closed_loop(one_call: OneCall, calls: tuple[PrimesCall, ...], callers: int, start: float, end: float) -> Run:
    """`callers` callers calling in turn until `end`; calls finishing inside [start, end] count for the window."""
    run = Run()

    async def caller(index: int) -> None:
        n = index
        while time.monotonic() < end:
            call = calls[n % len(calls)]
            n += callers
            began = time.monotonic()
            correct = await one_call(call)
            finished = time.monotonic()
            run.errors += 0 if correct else 1
            run.run_useful += call.steps if correct else 0
            if correct and start <= finished <= end:
                run.calls += 1
                run.latencies.append(finished - began)

    await asyncio.gather(*(caller(i) for i in range(callers)))
    return run


async def measure_mode(
    cluster: LocalCluster, as_task: bool, calls: tuple[PrimesCall, ...], callers: int, warmup: float, window: float
) -> Run:
    """One closed loop of plain calls (`as_task` false) or tasks, with the workers' counters around its window."""
    async with AsyncClient(cluster.mcp_url, policy=PATIENT) as client:

        async def one_call(call: PrimesCall) -> bool:
            try:
                done = await client.call_tool("count_primes", call.arguments, task=as_task)
            except Exception:  # a failed call is an error, never allowed to stop the benchmark
                return False
            return call.correct(done) and (done.task_id is not None) == as_task

        first = await asyncio.to_thread(_counters, cluster)
        start = time.monotonic() + warmup
        running = asyncio.create_task(closed_loop(one_call, calls, callers, start, start + window))
        await asyncio.sleep(warmup)
        before = await asyncio.to_thread(_counters, cluster)
        await asyncio.sleep(window)
        after = await asyncio.to_thread(_counters, cluster)
        run = await running
        last = await asyncio.to_thread(_counters, cluster)
    run.seconds = after.at - before.at
    run.window_steps = after.steps - before.steps
    run.cpu_seconds = after.cpu - before.cpu
    run.run_executed = last.steps - first.steps
    run.checkpoint_seconds, run.checkpoints = (
        last.checkpoint_seconds - first.checkpoint_seconds,
        last.writes - first.writes,
    )
    run.window_rates = [run.rate]
    return run


@dataclass(frozen=True)
class Counters:
    """The cluster's own counters at one moment."""

    steps: float
    checkpoint_seconds: float
    writes: float
    cpu: float
    at: float


def _counters(cluster: LocalCluster) -> Counters:
    seconds, writes, _ = checkpoint_totals(cluster)
    return Counters(steps_executed(cluster), seconds, writes, cluster_cpu(cluster), time.monotonic())


async def measure_throughput(
    cluster: LocalCluster, calls: tuple[PrimesCall, ...], callers: int, warmup: float, window: float
) -> dict[str, Run]:
    """MRTR, tasks, tasks, MRTR: each mode's two windows merged."""
    runs = {"MRTR calls": Run(), "tasks": Run()}
    for as_task in (False, True, True, False):
        name = "tasks" if as_task else "MRTR calls"
        runs[name] = runs[name].merge(await measure_mode(cluster, as_task, calls, callers, warmup, window))
    return runs


def measure_recovery(cluster: LocalCluster, trials: int, *, slice_ms: int, lease_ms: int) -> tuple[list[Recovery], int]:
    """`trials` recoveries (the victim restarted between them); returns them and the kills that missed a slice."""
    assert cluster.redis_url is not None
    view = TaskStoreView(cluster.redis_url)
    found: list[Recovery] = []
    missed = 0
    try:
        while len(found) < trials and missed < 2 * trials:
            outcome = recover_once(
                cluster, view, LONG, slice_ms=slice_ms, lease_ms=lease_ms, attempt=len(found) + missed
            )
            if outcome is None:
                missed += 1
            else:
                found.append(outcome)
            if len(found) < trials:
                dead = [i for i, handle in cluster.workers.items() if not handle.process.running]
                for instance in dead:
                    cluster.restart_worker(instance)
    finally:
        view.close()
    return found, missed


def main() -> int:
    options = parser(__doc__, duration=15.0, duration_help="seconds of each throughput window (two per mode)")
    options.add_argument("--warmup", type=float, default=3.0, help="seconds of load before each window (default 3)")
    options.add_argument("--callers", type=int, default=12, help="closed-loop callers (default 12)")
    options.add_argument("--latency", type=float, default=10.0, help="seconds of the latency phase (default 10)")
    options.add_argument("--recoveries", type=int, default=10, help="kill -9 trials (default 10)")
    options.add_argument("--limit", type=int, default=0, help="one count_primes limit instead of the mix (smoke runs)")
    options.add_argument("--lease-ms", type=int, default=DEFAULT_LEASE_MS, help="worker task lease (default 5000)")
    options.add_argument("--slice-ms", type=int, default=DEFAULT_SLICE_MS, help="worker task slice (default 1000)")
    options.add_argument(
        "--recovery-only",
        action="store_true",
        help="only the kill -9 trials, written as their own section (tasks-recovery) of the report",
    )
    args = options.parse_args()
    calls = (PrimesCall(args.limit, min(args.limit, 2_500_000)),) if args.limit else MIX
    env = {
        "MRTR_WORKER_REDIS_PREFIX": PREFIX,
        "MRTR_WORKER_TASK_LEASE_MS": str(args.lease_ms),
        "MRTR_WORKER_TASK_SLICE_MS": str(args.slice_ms),
    }
    if args.recovery_only:
        with clusters(env, workers=WORKERS) as (cluster,):
            recoveries, missed = measure_recovery(
                cluster, args.recoveries, slice_ms=args.slice_ms, lease_ms=args.lease_ms
            )
        publish("tasks-recovery", recovery_report(recoveries, missed, args), write=not args.no_report)
        return 1 if sum(not r.correct for r in recoveries) or len(recoveries) < args.recoveries else 0
    with clusters(env, workers=WORKERS) as (cluster,):
        latency = asyncio.run(measure_latency(cluster, 4, args.latency))
        runs = asyncio.run(measure_throughput(cluster, calls, args.callers, args.warmup, args.duration))
        recoveries, missed = measure_recovery(cluster, args.recoveries, slice_ms=args.slice_ms, lease_ms=args.lease_ms)
    settings = Settings(args.callers, calls, args.duration, args.warmup, args.lease_ms, args.slice_ms)
    publish("tasks", report(latency, runs, recoveries, settings), write=not args.no_report)
    publish("tasks-recovery", recovery_report(recoveries, missed, args), write=not args.no_report)
    errors = latency.errors + sum(run.errors for run in runs.values()) + sum(not r.correct for r in recoveries)
    return 1 if errors or len(recoveries) < args.recoveries else 0


@dataclass(frozen=True)
class Settings:
    callers: int
    calls: tuple[PrimesCall, ...]
    window: float
    warmup: float
    lease_ms: int
    slice_ms: int


def recovery_report(recoveries: list[Recovery], missed: int, args: argparse.Namespace) -> list[str]:
    """The kill -9 trials' section (tasks-recovery), whichever run measured them: one place for the figure."""
    return [
        "## Tasks: the next step elsewhere after kill -9",
        "",
        "One cluster: the proxy, three workers and one Redis, every request through the proxy, the workers' "
        f"task settings at lease {args.lease_ms} ms and slice {args.slice_ms} ms (`scripts/bench tasks`, or "
        "`--recovery-only` for the recovery trials alone). Run on a busy two-core machine shared with other work.",
        "",
        *_recovery_lines(recoveries, missed, args.lease_ms, args.slice_ms),
        *([] if all(r.correct for r in recoveries) else ["", "**A recovered task gave a wrong answer.**"]),
    ]


def report(latency: Latency, runs: dict[str, Run], recoveries: list[Recovery], s: Settings) -> list[str]:
    plain, tasks = runs["MRTR calls"], runs["tasks"]
    ratio = tasks.rate / plain.rate if plain.rate else float("nan")
    mix = ", ".join(f"{call.limit // 1_000_000}M ({call.steps} steps)" for call in s.calls)
    lines = [
        "## Tasks: latency, throughput against MRTR calls, checkpoints",
        "",
        "One cluster: the proxy, three workers and one Redis (`scripts/cluster`'s layout), every request through "
        f"the proxy, the workers' task settings at lease {s.lease_ms} ms and slice {s.slice_ms} ms. Run on a busy "
        "two-core machine shared with other work (the share is below): absolute times are inflated, read them "
        "with that in mind. Every answer is checked (exact prime counts; a task for every task call).",
        "",
        "### Latency through the proxy",
        "",
        f"Four callers create one-step `count_primes` tasks ({SMALL.limit:,}) with `mrtr_client` and follow them "
        "to the end (polling as `pollIntervalMs` says), while two readers read the newest task back to back "
        "and one caller calls `echo` (a plain one-round call, for comparison). Creation is the `tools/call` "
        "answered with `CreateTaskResult` (sent once the record is in Redis); all are timed by the client.",
        "",
    ]
    measured = (
        ("task creation (`tools/call`)", latency.created_ms),
        ("`tasks/get`", latency.get_ms),
        ("`echo` (plain call, for comparison)", latency.echo_ms),
    )
    lines += markdown_table(
        ["request", "samples", "p50 ms", "p99 ms", "max ms"],
        "lrrrr",
        [
            (
                name,
                len(values),
                f"{percentile(values, 50):.1f}",
                f"{percentile(values, 99):.1f}",
                f"{max(values, default=float('nan')):.1f}",
            )
            for name, values in measured
        ],
    )
    lines += [
        "",
        f"{latency.tasks} tasks completed, {latency.errors} errors or wrong answers.",
        "",
        "### Throughput: the same computations as tasks and as MRTR calls",
        "",
        f"{s.callers} closed-loop callers call `count_primes` (limits in turn {mix}) as plain MRTR calls, then as "
        f"tasks, in windows ordered MRTR, tasks, tasks, MRTR ({s.warmup:g} s warm-up, then {s.window:g} s measured "
        "each). **Useful steps/s** are the workers' step counters over the windows, every step of the run "
        "accounted for by a correctly completed call (**wasted** = the difference, taken off). Call latency "
        "includes, for a task, the wait until the poll that sees it done.",
        "",
    ]
    rows = []
    for name, run in runs.items():
        each = " / ".join(f"{rate:.1f}" for rate in run.window_rates)
        p50_p99 = f"{median(run.latencies):.2f} / {percentile(run.latencies, 99):.2f}"
        calls = (run.calls, run.errors, f"{run.wasted:.0f}")
        rows.append((name, f"{run.rate:.1f}", each, f"{run.per_cpu_second:.2f}", *calls, p50_p99))
    columns = [
        "mode", "useful steps/s", "each window", "useful steps per cluster CPU-second",
        "calls completed in the windows", "errors", "wasted steps", "call latency p50 / p99 s",
    ]  # fmt: skip
    lines += markdown_table(columns, "lrlrrrrl", rows)
    per_cpu = tasks.per_cpu_second / plain.per_cpu_second if plain.per_cpu_second else float("nan")
    lines += [
        "",
        f"Tasks / MRTR calls (useful steps/s): **{ratio:.2f}**. Target ≥ {TARGET_RATIO}: "
        f"{verdict(ratio >= TARGET_RATIO)}. Per CPU-second the cluster used (proxy, workers with their step "
        f"pools, Redis; a cross-check that depends less on the share of the machine other work left us): "
        f"**{per_cpu:.2f}**. Only a handful of calls complete in each window on this machine, and other work took most "
        "of its CPU: read the ratio by the spread of the windows, not better. The MRTR "
        "calls, at twice the workers' computation slots, are shed and resumed (re-sealed state, new rounds) "
        "where tasks queue in Redis and run up to four slices per worker without hand-backs.",
        "",
        "### Checkpoint write per slice",
    ]
    lines += _checkpoint_lines(tasks, s.slice_ms, [r.record_bytes for r in recoveries])
    lines += ["", "The recovery after kill -9 of the worker running a task: the next section (tasks-recovery)."]
    errors = latency.errors + plain.errors + tasks.errors
    if errors:
        lines += ["", f"**{errors} call(s) failed or gave a wrong answer.**"]
    return lines


def _checkpoint_lines(tasks: Run, slice_ms: int, record_bytes: list[int]) -> list[str]:
    if not tasks.checkpoints:
        return ["", "No task slice ended during the task runs: nothing to report."]
    mean_ms = tasks.checkpoint_seconds / tasks.checkpoints * 1000
    size = f" The sealed record of a running task is {median(record_bytes):.0f} bytes." if record_bytes else ""
    return [
        "",
        "From the workers' `mrtr_worker_task_checkpoint_seconds` (the write that ends every slice: seal the record, "
        "then one Redis transaction with the checkpoint, the acknowledgement of the slice and the next one's "
        f"message), over the task runs, under the full load above: **{mean_ms:.2f} ms** per write on average, "
        f"{tasks.checkpoints:.0f} writes. Against a slice of {slice_ms} ms that is **{mean_ms / slice_ms:.1%}** "
        "of the slice (an upper bound: a slice runs at least that long, except a task's last). A histogram gives "
        f"no exact percentiles, so only the mean is shown.{size}",
    ]


def _recovery_lines(recoveries: list[Recovery], missed: int, lease_ms: int, slice_ms: int) -> list[str]:
    lines = [
        f"A {LONG.limit // 1_000_000}M `count_primes` task ({LONG.steps} steps) is created; the instance holding its "
        "slice (XPENDING in Redis) is killed with SIGKILL, step pool included, at a random point of the slice; "
        "Redis is read every 5 ms from then on. **Claimed**: a survivor holds the slice's message. **Next step**: "
        "the survivor begins the slice (the task's fencing token moves, `holder` names it), and its first step "
        "starts there. **Written again**: the survivor's first write of the task (its next checkpoint, or the "
        "result). The task then completes; its count and step count are checked.",
        "",
    ]
    columns = ["trial", "killed", "claimed s", "next step s", "written again s", "exact result and steps"]
    rows = [
        (n, r.victim, f"{r.taken_over:.2f}", f"{r.next_step:.2f}", f"{r.rewritten:.2f}", "yes" if r.correct else "NO")
        for n, r in enumerate(recoveries, 1)
    ]
    lines += markdown_table(columns, "rlrrrl", rows)
    if not recoveries:
        return [*lines, "", "**No recovery was measured.**"]
    steps = [r.next_step for r in recoveries]
    worst = max(steps)
    lines += [
        "",
        f"Next step elsewhere after kill -9, over {len(recoveries)} kills: p50 **{percentile(steps, 50):.2f} s**, "
        f"worst **{worst:.2f} s**. Target ≤ {NEXT_STEP_TARGET_S:g} s: {verdict(worst <= NEXT_STEP_TARGET_S)} "
        f"(the lease, {lease_ms / 1000:g} s, no longer decides: before issue 24 the takeover waited it out, 5.4 s "
        "measured after kill -9 with the default lease).",
        "",
        "Why these times: a killed process's sockets close with it, so Redis drops its named connections at once "
        "(`mrtr_worker.tasks.presence`); every live worker looks for dead holders at each heartbeat (every "
        "200 ms by default), claims the dead worker's slices in one script and begins them, fenced "
        "(`tasks.leases`). The claim thus lands within about one heartbeat of the kill, plus the time a busy "
        "machine takes to schedule the survivor; the first write follows at the end of the survivor's slice "
        f"({slice_ms} ms).",
    ]
    if missed:
        lines.append(f"({missed} kill(s) landed between two slices and were not counted.)")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
