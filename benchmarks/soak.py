"""A soak: the cluster at about 70 % of its capacity for a long while, with tasks and MRTR calls; does anything grow?

One cluster (the proxy, three workers, one Redis). First its capacity is
measured: a closed loop of callers making `count_primes` calls, plain MRTR
calls and tasks in turn, for `--calibrate` seconds. Then calls of the same
mix arrive at `--load` times that rate (an open loop: a slow answer does
not hold back the next call) for `--minutes`, every answer checked exactly.

Watched all along (`benchmarks._soak`): the resident memory of every
process (each worker, its step pool, the proxy, Redis), Redis's
`used_memory`, its key count and the slice stream's length; and the p99 of
each kind of call per `--window`. Each series gets a slope per hour and a
verdict: flat unless the slope stands out of the series' own scatter and
the change it predicts over the run exceeds 2 % of its mean. Tasks expire
`--ttl` seconds after their last activity, so once the load stops the key
count must come back to what it was before any call: that is waited for
and timed.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field

from benchmarks._cluster import PATIENT, PrimesCall, clusters, verdict
from benchmarks._soak import Sampler, Trend, trend
from benchmarks._tasks import cluster_cpu
from benchmarks.report import parser, publish
from mrtr_client import AsyncClient
from mrtr_ops.local.cluster import LocalCluster
from mrtr_ops.percentiles import percentile
from mrtr_ops.waiting import wait_until

PREFIX = "soak:"
KINDS = ("MRTR call", "task")
MAX_IN_FLIGHT = 400
"""Arrivals beyond this many unfinished calls are dropped (and counted): a stalled cluster must not take the
benchmark's memory with it."""


@dataclass(frozen=True)
class Done:
    kind: str
    started: float
    ended: float
    ok: bool


@dataclass
class Soak:
    capacity: float = 0.0
    """Calls per second the closed loop completed."""
    rate: float = 0.0
    calls: list[Done] = field(default_factory=list)
    dropped: int = 0
    cpu_share: float = 0.0
    """The cluster's CPU over the soak, as a share of the machine's cores."""
    calibration_cpu_share: float = 0.0
    baseline_keys: int = 0
    keys_after_load: int = 0
    keys_back_after: float | None = None
    """Seconds after the last call until the key count was back to the baseline (None: it was not)."""
    keys_at_end: int = 0


async def _one(client: AsyncClient, call: PrimesCall, kind: str) -> Done:
    started = time.monotonic()
    try:
        done = await client.call_tool("count_primes", call.arguments, task=kind == "task")
        ok = call.correct(done) and (done.task_id is not None) == (kind == "task")
    except Exception:  # a failed call is counted, never allowed to stop the soak
        ok = False
    return Done(kind, started, time.monotonic(), ok)


async def calibrate(cluster: LocalCluster, call: PrimesCall, callers: int, seconds: float) -> tuple[float, float]:
    """Calls per second a closed loop of `callers` completes, and the cluster's CPU share meanwhile."""
    done: list[Done] = []
    end = time.monotonic() + seconds
    cpu_before, started = cluster_cpu(cluster), time.monotonic()
    async with AsyncClient(cluster.mcp_url, policy=PATIENT) as client:

        async def caller(index: int) -> None:
            n = index
            while time.monotonic() < end:
                done.append(await _one(client, call, KINDS[n % 2]))
                n += 1

        await asyncio.gather(*(caller(i) for i in range(callers)))
    elapsed = time.monotonic() - started
    share = (cluster_cpu(cluster) - cpu_before) / elapsed / _cores()
    return sum(1 for d in done if d.ok) / elapsed, share


async def soak(cluster: LocalCluster, call: PrimesCall, rate: float, seconds: float, result: Soak) -> None:
    """Calls at `rate` per second for `seconds`, MRTR calls and tasks in turn; waits for the last to finish."""
    interval = 1.0 / rate
    running: set[asyncio.Task[None]] = set()
    cpu_before, started = cluster_cpu(cluster), time.monotonic()
    async with AsyncClient(cluster.mcp_url, policy=PATIENT) as client:

        async def one(kind: str) -> None:
            result.calls.append(await _one(client, call, kind))

        n = 0
        while (planned := started + n * interval) < started + seconds:
            await asyncio.sleep(max(0.0, planned - time.monotonic()))
            if len(running) >= MAX_IN_FLIGHT:
                result.dropped += 1
            else:
                task = asyncio.create_task(one(KINDS[n % 2]))
                running.add(task)
                task.add_done_callback(running.discard)
            n += 1
        elapsed = time.monotonic() - started
        result.cpu_share = (cluster_cpu(cluster) - cpu_before) / elapsed / _cores()
        await asyncio.gather(*running)


def _cores() -> int:
    return os.cpu_count() or 1


def windows(calls: list[Done], start: float, length: float, kind: str) -> list[tuple[float, float, int]]:
    """(middle of the window, p99 in ms, calls) of each `length`-second window of completed `kind` calls."""
    found: dict[int, list[float]] = {}
    for call in calls:
        if call.kind == kind and call.ok:
            found.setdefault(int((call.ended - start) // length), []).append((call.ended - call.started) * 1000)
    return [
        ((index + 0.5) * length, percentile(latencies, 99), len(latencies))
        for index, latencies in sorted(found.items())
    ]


def report(result: Soak, sampler: Sampler, settings: Settings, soak_start: float, soak_end: float) -> list[str]:
    minutes = (soak_end - soak_start) / 60
    ok = sum(1 for c in result.calls if c.ok)
    wrong = len(result.calls) - ok
    lines = [
        "## Soak: a long run at about 70 % load",
        "",
        f"One cluster (the proxy, three workers, one Redis) under `count_primes` to {settings.call.limit:,} "
        f"({settings.call.steps} steps), MRTR calls and tasks in turn, arriving at {settings.load:.0%} of the "
        f"capacity a closed loop of {settings.callers} callers measured first ({result.capacity:.2f} calls/s): "
        f"{result.rate:.2f} calls/s for {minutes:.1f} min. The cluster used {result.cpu_share:.0%} of the "
        f"machine's CPU meanwhile ({result.calibration_cpu_share:.0%} at capacity). {ok} calls answered exactly, "
        f"{wrong} not, {result.dropped} arrivals dropped (more than {MAX_IN_FLIGHT} unfinished). Tasks expire "
        f"{settings.ttl:g} s after their last activity.",
        "",
        "| series | mean | slope per hour | change over the run | verdict |",
        "|---|---:|---:|---:|---|",
    ]
    trends: dict[str, Trend] = {}
    for name, series in sampler.series.items():
        kept = series.between(soak_start - sampler.started, soak_end - sampler.started)
        trends[name] = found = trend(kept.times, kept.values)
        unit = "" if name in ("Redis keys", "slice stream length") else " MiB"
        lines.append(
            f"| {name} | {found.mean:.1f}{unit} | {found.slope_per_hour:+.2f}{unit} | {found.change:+.2f}{unit} "
            f"| {found.verdict} |"
        )
    lines += [
        "",
        "Redis keys climb while live tasks build up over the first TTL: they are judged by their return to the "
        "baseline (below), not by this slope.",
        "",
        f"p99 of the calls that ended in each {settings.window:g} s window, in ms:",
        "",
    ]
    per_kind = {kind: windows(result.calls, soak_start, settings.window, kind) for kind in KINDS}
    count = max((int(w[0] // settings.window) + 1 for found in per_kind.values() for w in found), default=0)
    lines += [
        "| kind | " + " | ".join(f"window {i + 1}" for i in range(count)) + " | slope per hour | verdict |",
        "|---|" + "---:|" * count + "---:|---|",
    ]
    for kind, found_windows in per_kind.items():
        p99 = trend([w[0] for w in found_windows], [w[1] for w in found_windows])
        by_index = {int(w[0] // settings.window): w[1] for w in found_windows}
        cells = " | ".join(f"{by_index[i]:.0f}" if i in by_index else "n/a" for i in range(count))
        lines.append(f"| {kind} | {cells} | {p99.slope_per_hour:+.0f} | {p99.verdict} |")
    back = (
        f"back to the baseline {result.keys_back_after:.0f} s after the last call"
        if result.keys_back_after is not None
        else f"**not back** to the baseline: {result.keys_at_end} keys"
    )
    growth = [name for name, t in trends.items() if t.verdict == "grows" and name != "Redis keys"]
    returned = verdict(result.keys_back_after is not None)
    lines += [
        "",
        f"Redis keys: {result.baseline_keys} before any call, {result.keys_after_load} when the load stopped, "
        f"{back} (the task TTL is {settings.ttl:g} s).",
        "",
        f"Target: no growth beyond noise ({verdict(not growth)}"
        + (f": {', '.join(growth)} grew" if growth else "")
        + f"); the key count returns to its baseline once the TTLs pass ({returned}).",
    ]
    return lines


@dataclass(frozen=True)
class Settings:
    call: PrimesCall
    load: float
    callers: int
    window: float
    ttl: float


def main() -> int:
    options = parser(__doc__, duration=30.0, duration_help="seconds of the calibration's closed loop")
    options.add_argument("--minutes", type=float, default=30.0, help="minutes of the soak itself (default 30)")
    options.add_argument("--load", type=float, default=0.7, help="share of the measured capacity (default 0.7)")
    options.add_argument("--callers", type=int, default=8, help="closed-loop callers of the calibration (default 8)")
    options.add_argument("--window", type=float, default=300.0, help="seconds per p99 window (default 300)")
    options.add_argument("--sample", type=float, default=10.0, help="seconds between samples (default 10)")
    options.add_argument("--ttl", type=float, default=120.0, help="task TTL in seconds (default 120)")
    options.add_argument("--limit", type=int, default=20_000_000, help="count_primes limit (default 20,000,000)")
    args = options.parse_args()
    call = PrimesCall(args.limit, min(args.limit, 2_500_000))
    settings = Settings(call, args.load, args.callers, args.window, args.ttl)
    env = {
        "MRTR_WORKER_REDIS_PREFIX": PREFIX,
        "MRTR_WORKER_TASK_TTL_MS": str(int(args.ttl * 1000)),
        "MRTR_WORKER_MAX_LIVE_TASKS": "100000",  # every call is anonymous: one principal
    }
    result = Soak()
    with clusters(env, workers=3) as (cluster,):
        assert cluster.redis_url is not None
        sampler = Sampler(cluster, cluster.redis_url, PREFIX, interval=args.sample)
        wait_until(lambda: sampler.keys() > 0, timeout=60, what="the workers' runners to register in Redis")
        time.sleep(max(1.0, args.sample))  # let every runner write its heartbeat before the baseline is read
        result.baseline_keys = sampler.keys()
        sampler.start()
        result.capacity, result.calibration_cpu_share = asyncio.run(
            calibrate(cluster, call, args.callers, args.duration)
        )
        result.rate = max(0.1, args.load * result.capacity)
        print(f"capacity {result.capacity:.2f} calls/s; soaking at {result.rate:.2f} calls/s", flush=True)
        soak_start = time.monotonic()
        asyncio.run(soak(cluster, call, result.rate, args.minutes * 60, result))
        soak_end = time.monotonic()
        result.keys_after_load = sampler.keys()
        try:
            wait_until(
                lambda: sampler.keys() <= result.baseline_keys,
                timeout=args.ttl + 60,
                interval=1.0,
                what="the key count to come back to its baseline",
            )
            result.keys_back_after = time.monotonic() - soak_end
        except TimeoutError:
            result.keys_back_after = None
        result.keys_at_end = sampler.keys()
        sampler.stop()
    publish("soak", report(result, sampler, settings, soak_start, soak_end), write=not args.no_report)
    wrong = sum(1 for c in result.calls if not c.ok)
    return 1 if wrong or not result.calls else 0


if __name__ == "__main__":
    raise SystemExit(main())
