"""Tasks across Redis failovers (Sentinel), with writes waiting for a replica (WAIT) and without, side by side.

One Redis set with Sentinel (`mrtr_ops.local.redis_ha`: a primary, two
replicas, three sentinels) serves two clusters at once, each under its own
key prefix: one whose workers wait for a replica after every task write
(`MRTR_WORKER_REDIS_WAIT_REPLICAS=1`) and one whose workers do not. Both
see the same failovers at the same instants. Under load, faults hit the
primary again and again (`--faults`: killed, paused as behind a partition,
or killed while its replicas lag); each time the benchmark waits until the
sentinels have promoted a replica that accepts writes, then brings the old
primary back (it rejoins as a replica), and the load goes on.

Two loads per mode (`benchmarks._failover` defines acknowledged and lost):

* tasks through each cluster's proxy, created and followed with `tasks/get`:
  acknowledged creations lost, checkpoints seen going back, results checked
  exactly, and every call timed, for how long task calls fail;
* the worker's own `TaskStore` (through Sentinel, with the mode's WAIT)
  writing records and checkpoints as fast as it can. On loopback a replica
  trails its primary by well under a millisecond, so a plain kill rarely
  catches a write in flight; the `lag` fault widens that window to a second.
"""

from __future__ import annotations

import asyncio
import math
import random
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks._cluster import PrimesCall, median, stop_cluster
from benchmarks._failover import PROBE_SECONDS, CallLog, TaskTraffic, WriterProcess, WriterSummary
from benchmarks.report import REPORT, parser, publish
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.local.redis_ha import RedisHA
from mrtr_ops.local.sentinel import SentinelTiming
from mrtr_ops.percentiles import percentile
from mrtr_worker.redis_link import WaitPolicy

MODES = ("WAIT for 1 replica", "no WAIT")
FAULTS_PAGE = REPORT.parent / "redis.md"
"""Where the runs with faults other than a plain kill go (docs/benchmarks.md keeps the headline kill run)."""
WAIT_TIMEOUT_MS = 500
FAULTS = {
    "kill": "the primary killed with SIGKILL (restarted as a replica)",
    "pause": "the primary paused with SIGSTOP (a partition; woken once the sentinels moved on)",
    "lag": "the replication stream held up for 1 s (replicas stopped, their buffers filled), then the primary killed",
}
"""What `--faults` may name, as the report says it."""
STALL_SECONDS = 1.0
"""A task call that took longer than this counts as disrupted even when it succeeded (redis-py retried)."""
LOST = "unknown_task"
"""The reason `tasks/get` gives for a task it does not find: an acknowledged creation lost."""


@dataclass(frozen=True)
class Failover:
    kind: str
    """"kill" (SIGKILL, restarted as a replica) or "pause" (SIGSTOP, woken once the sentinels moved on)."""
    killed: float
    """When the primary was killed or paused (monotonic seconds)."""
    promoted: float
    """Seconds until the sentinels agreed on a new primary that accepts writes."""
    restarted: float
    """Seconds until the killed (or paused) node was back, synchronised, as a replica."""


@dataclass
class Mode:
    name: str
    cluster: LocalCluster
    traffic: TaskTraffic
    writer: WriterProcess
    store: WriterSummary | None = None


def _cluster(work: Path, ha: RedisHA, index: int, wait: int, slice_ms: int, workers: int) -> LocalCluster:
    env = {
        **ha.worker_env(wait_replicas=wait, wait_timeout_ms=WAIT_TIMEOUT_MS),
        "MRTR_WORKER_REDIS_PREFIX": f"failover{index}:",
        "MRTR_WORKER_TASK_SLICE_MS": str(slice_ms),
    }
    config = ClusterConfig(
        workers=workers,
        port=0,
        tool_packs=("demo", "compute"),
        work_dir=work / f"c{index}",
        worker_env=env,
        redis=False,  # the clusters share the set started here, reached through its sentinels
    )
    return LocalCluster(config)


async def _fail_over(ha: RedisHA, kinds: list[str], count: int, gap: float) -> list[Failover]:
    failovers: list[Failover] = []
    for index in range(count):
        kind = kinds[index % len(kinds)]
        await asyncio.sleep(gap * random.uniform(0.75, 1.25))
        killed = time.monotonic()
        fault = {"kill": ha.kill_primary, "pause": ha.pause_primary, "lag": ha.kill_primary_behind_replicas}[kind]
        old = await asyncio.to_thread(fault)
        await asyncio.to_thread(ha.wait_for_failover, old, 120.0)
        promoted = time.monotonic() - killed
        await asyncio.to_thread(ha.resume if kind == "pause" else ha.restart, old, 120.0)
        failovers.append(Failover(kind, killed, promoted, time.monotonic() - killed))
        print(f"failover {index + 1} ({kind}): new primary in {promoted:.2f} s, old one back as replica", flush=True)
    await asyncio.sleep(gap)
    return failovers


async def _run(
    modes: list[Mode], ha: RedisHA, kinds: list[str], failovers: int, gap: float, drain: float
) -> list[Failover]:
    stop = asyncio.Event()
    loads = [asyncio.create_task(m.traffic.run(stop)) for m in modes]
    try:
        done = await _fail_over(ha, kinds, failovers, gap)
    finally:
        stop.set()
        await asyncio.gather(*loads, return_exceptions=True)
    for mode in modes:
        mode.store = await asyncio.to_thread(mode.writer.stop)
    await asyncio.gather(*(m.traffic.finish(drain) for m in modes))
    return done


@dataclass(frozen=True)
class Outage:
    """The probes around one failover (`TaskTraffic._probe`): until when, after the fault, a task call failed or
    stalled, how many failed, and the slowest that succeeded."""

    disrupted_for: float
    back_after: float
    """From when (seconds after the fault) every probe started succeeded within `STALL_SECONDS`."""
    failed: int
    calls: int
    slowest_ok: float


def outage(calls: list[CallLog], failover: Failover, until: float) -> Outage:
    """The calls that started between the fault and `until` (the next fault, or the end)."""
    window = [c for c in calls if failover.killed <= c.started < until]
    failed = [c for c in window if not c.ok and c.reason != LOST]  # a lost task is counted as lost, not as down
    disrupted = failed + [c for c in window if c.ok and c.ended - c.started > STALL_SECONDS]
    last = max((c.ended for c in disrupted), default=failover.killed) - failover.killed
    back = max((c.started for c in disrupted), default=failover.killed) - failover.killed
    slowest = max((c.ended - c.started for c in window if c.ok), default=0.0)
    return Outage(last, back, len(failed), len(window), slowest)


def _outages(mode: Mode, failovers: list[Failover]) -> list[Outage]:
    ends = [f.killed for f in failovers[1:]] + [math.inf]
    return [outage(mode.traffic.probes, f, end) for f, end in zip(failovers, ends, strict=True)]


def _reasons(calls: list[CallLog]) -> str:
    tally: dict[str, int] = {}
    for call in calls:
        if not call.ok and call.reason != LOST:  # a lost task answers "not found" at every poll: counted as lost
            tally[call.reason] = tally.get(call.reason, 0) + 1
    return ", ".join(f"{reason} {n}" for reason, n in sorted(tally.items(), key=lambda kv: -kv[1])) or "none"


def _latency(seconds: list[float]) -> str:
    if not seconds:
        return "n/a"
    ms = [v * 1000 for v in seconds]
    return f"{percentile(ms, 50):.1f} / {percentile(ms, 99):.1f}"


def report(modes: list[Mode], failovers: list[Failover], args: Settings) -> list[str]:
    spans = [_outages(m, failovers) for m in modes]
    stores = [m.store for m in modes if m.store is not None]
    cells = " | ".join(m.name for m in modes)

    def row(label: str, *values: object) -> str:
        return f"| {label} | " + " | ".join(str(v) for v in values) + " |"

    promoted = [f.promoted for f in failovers]
    counts = {kind: sum(f.kind == kind for f in failovers) for kind in FAULTS}
    faults = "; ".join(f"{FAULTS[kind]} {n} times" for kind, n in counts.items() if n)
    kinds = ", ".join(kind for kind, n in counts.items() if n)
    lines = [
        f"## Tasks across Redis failovers (Sentinel): {kinds}",
        "",
        f"One Redis set (a primary, two replicas, three sentinels; `down-after-milliseconds` {args.down_after_ms}, "
        "`min-replicas-to-write 1`) shared by two clusters of "
        f"{args.workers} workers, one per column, under load; faults about every {args.gap:g} s: {faults}. "
        f"The sentinels had a new primary accepting writes {median(promoted):.2f} s after a fault (median; longest "
        f"{max(promoted):.2f} s). "
        f"Tasks: `count_primes` to {args.call.limit:,} ({args.call.steps} steps, slices of {args.slice_ms} ms).",
        "",
        f"| | {cells} |",
        "|---|" + "---:|" * len(modes),
        "| **Tasks through the proxy** | " + " | " * len(modes),
        row("creations acknowledged", *(len(m.traffic.acknowledged) + len(m.traffic.probe_tasks) for m in modes)),
        row("acknowledged creations lost", *(len(m.traffic.lost) for m in modes)),
        row("tasks seen missing, then found", *(m.traffic.found_again() for m in modes)),
        row("checkpoints seen going back", *(len(m.traffic.regressions) for m in modes)),
        row("tasks completed exactly / wrong / unfinished", *(_ends(m.traffic) for m in modes)),
        row("task calls work again from, s after a fault (median; longest)", *(_back(o) for o in spans)),
        row("task calls failing or stalled until, s after a fault (median; longest)", *(_failing(o) for o in spans)),
        row("probe calls failed / made", *(_failed(o) for o in spans)),
        row("slowest probe call that succeeded, s", *(_slowest(o) for o in spans)),
        "| **The store at full speed** | " + " | " * len(modes),
        row("writes acknowledged", *(s.acknowledged for s in stores)),
        row("acknowledged creations lost", *(s.lost_creations for s in stores)),
        row("acknowledged checkpoints lost", *(s.lost_checkpoints for s in stores)),
        row("writes not confirmed by a replica (refused)", *(s.unconfirmed for s in stores)),
        row("writes failed (no primary, or none with a replica)", *(s.failed for s in stores)),
        row("unacknowledged writes found kept", *(s.landed_unacknowledged for s in stores)),
        row("write latency p50 / p99, ms", *(_latency(s.latencies) for s in stores)),
        "",
        "Why calls failed: "
        + "; ".join(f"{m.name}: {_reasons(m.traffic.calls + m.traffic.probes)}" for m in modes)
        + ".",
        *(
            f"**The store writer of {m.name} stopped early**: {m.store.crashed}"
            for m in modes
            if m.store and m.store.crashed
        ),
        "",
        "*Acknowledged*: a creation answered `CreateTaskResult`; a store write for which `create`/`commit` "
        "returned (with WAIT: after a replica confirmed it). *Lost*: not found once the faults are over; a "
        "checkpoint is lost when the record's revision is then below the acknowledged one (the store). *Seen* "
        "(the proxy): what clients' `tasks/get` answers showed during the run: a task missing and later found, "
        "fewer steps done than an earlier answer, or a finished task working again (a lost checkpoint, or a read "
        "answered by an old primary back from a partition, until the client's next recheck). Outages are read from "
        f"probes (a `tasks/get` or a creation every {PROBE_SECONDS:g} s, none waiting for another): *work again "
        f"from* is when the last probe that failed or took over {STALL_SECONDS:g} s had started, *failing or "
        "stalled until* when it ended.",
    ]
    return lines


def _ends(traffic: TaskTraffic) -> str:
    return f"{traffic.correct()} / {traffic.wrong()} / {traffic.unfinished()}"  # the probes' one-step tasks too


def _failing(outages: list[Outage]) -> str:
    spans = [o.disrupted_for for o in outages]
    return f"{median(spans):.2f}; {max(spans):.2f}" if spans else "n/a"


def _back(outages: list[Outage]) -> str:
    starts = [o.back_after for o in outages]
    return f"{median(starts):.2f}; {max(starts):.2f}" if starts else "n/a"


def _failed(outages: list[Outage]) -> str:
    return f"{sum(o.failed for o in outages)} / {sum(o.calls for o in outages)}"


def _slowest(outages: list[Outage]) -> str:
    return f"{max((o.slowest_ok for o in outages), default=0.0):.2f}"


@dataclass(frozen=True)
class Settings:
    workers: int
    gap: float
    down_after_ms: int
    slice_ms: int
    call: PrimesCall


def main() -> int:
    options = parser(__doc__, duration=5.0, duration_help="seconds of load between failovers (about)")
    options.add_argument("--failovers", type=int, default=6, help="primaries killed (default 6)")
    options.add_argument("--workers", type=int, default=2, help="workers per cluster (default 2)")
    options.add_argument("--down-after-ms", type=int, default=2_000, help="Sentinel's down-after-milliseconds")
    options.add_argument("--slice-ms", type=int, default=100, help="task slice, so tasks checkpoint often")
    options.add_argument("--limit", type=int, default=10_000_000, help="count_primes limit of each task")
    options.add_argument("--writers", type=int, default=4, help="store writers per mode (default 4)")
    options.add_argument(
        "--faults",
        default="kill",
        help="faults in turn: kill (SIGKILL the primary), pause (SIGSTOP it: a partition), lag (the replication "
        "stream held up for 1 s, then the primary killed); default kill",
    )
    options.add_argument("--keep", action="store_true", help="keep the work dir (logs of every process)")
    args = options.parse_args()
    kinds = [kind for kind in args.faults.split(",") if kind]
    if not kinds or set(kinds) - set(FAULTS):
        options.error(f"--faults takes some of {', '.join(FAULTS)} (comma-separated, used in turn)")
    call = PrimesCall(args.limit, min(args.limit, 500_000))
    settings = Settings(args.workers, args.duration, args.down_after_ms, args.slice_ms, call)
    work = Path(tempfile.mkdtemp(prefix="mrtr-failover-"))
    ha = RedisHA(work / "ha", timing=SentinelTiming(down_after_ms=args.down_after_ms))
    clusters: list[LocalCluster] = []
    modes: list[Mode] = []
    failed = True
    try:
        ha.start()
        for index, wait in enumerate((1, 0)):
            clusters.append(_cluster(work, ha, index, wait, args.slice_ms, args.workers).start())
        for i, (name, cluster, wait) in enumerate(zip(MODES, clusters, (1, 0), strict=True)):
            policy = WaitPolicy(wait, WAIT_TIMEOUT_MS)
            writer = WriterProcess(ha.sentinel_addresses, f"writer{i}:", policy, args.writers).start()
            modes.append(Mode(name, cluster, TaskTraffic(cluster.mcp_url, call), writer))
        for mode in modes:
            mode.writer.wait_ready()
        failovers = asyncio.run(_run(modes, ha, kinds, args.failovers, args.duration, drain=120.0))
        failed = False
    finally:
        for mode in modes:
            mode.writer.kill()
        with ThreadPoolExecutor(max(1, len(clusters))) as pool:
            list(pool.map(stop_cluster, clusters))
        ha.stop()
        if failed or args.keep:
            print(f"logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    for mode in modes:
        for number, (fault, seen) in enumerate(zip(failovers, _outages(mode, failovers), strict=True), 1):
            print(
                f"{mode.name}, fault {number} ({fault.kind}): calls work again after {seen.back_after:.2f} s, "
                f"failing or stalled until {seen.disrupted_for:.2f} s, "
                f"{seen.failed} of {seen.calls} failed, slowest success {seen.slowest_ok:.2f} s"
            )
        for task_id, what in mode.traffic.regressions:
            print(f"{mode.name}: task {task_id[:8]} went back: {what}")
    section = "failover" if kinds == ["kill"] else "failover-" + "-".join(kinds)
    page = REPORT if section == "failover" else FAULTS_PAGE
    publish(section, report(modes, failovers, settings), write=not args.no_report, report=page)
    broken = any(m.traffic.wrong() or m.traffic.unfinished() or (m.store and m.store.crashed) for m in modes)
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
