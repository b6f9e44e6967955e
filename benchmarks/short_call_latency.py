"""Latency of short calls while long computations saturate the cluster, with shedding on and off.

Two clusters (proxy + three workers each) differ only in
`MRTR_WORKER_SHEDDING`. On each in turn, the same long load runs: twice as
many concurrent `count_primes` callers as there are computation slots
(closed loop, the mix of `benchmarks._cluster.MIX`), from a child process so
that their client work cannot delay the short calls' load generator. Once
it has warmed up, `echo` calls are sent through the proxy at a fixed rate
(open loop, so a stall cannot hold back the next call) for the measured
window; their latency counts from the planned send time. An idle baseline
(no long load) comes first. The long calls are checked too, and their
throughput is shown beside the latency, since shedding could trade one for
the other.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from typing import Any

from benchmarks._cluster import MIX, PATIENT, clusters, median, proxy_responses, steps_executed
from benchmarks._load import LoadResult, echo_request, is_complete, open_loop
from benchmarks.report import markdown_table, parser, publish
from mrtr_client import AsyncClient
from mrtr_ops.local.cluster import LocalCluster
from mrtr_protocol.rounds import HAND_BACK_REASONS
from mrtr_worker.compute.policy import SheddingSettings

WORKERS = 3
SLOTS = 2
LONG_CALLERS = 2 * WORKERS * SLOTS
WARMUP = 2.0
MODES = {
    "shedding on": SheddingSettings().environment(),
    "shedding off": SheddingSettings(enabled=False).environment(),
}


@dataclass
class LongCalls:
    calls: int = 0
    errors: int = 0
    hops: list[int] = field(default_factory=list)


@dataclass
class Measured:
    echo: LoadResult
    long: LongCalls = field(default_factory=LongCalls)
    steps_per_s: float = 0.0
    proxy_rps: float = 0.0


async def long_load(url: str, stop: Event) -> LongCalls:
    """LONG_CALLERS callers calling count_primes until `stop` is set; each finishes the call it has in flight."""
    result = LongCalls()
    stopping = asyncio.Event()

    async def watch() -> None:
        await asyncio.to_thread(stop.wait)
        stopping.set()

    async with AsyncClient(url, policy=PATIENT) as client:

        async def caller(index: int) -> None:
            n = index
            while not stopping.is_set():
                call = MIX[n % len(MIX)]
                n += LONG_CALLERS
                try:
                    done = await client.call_tool("count_primes", call.arguments)
                except Exception:  # counted, never allowed to stop the benchmark
                    result.errors += 1
                    continue
                result.calls += 1
                result.errors += 0 if call.correct(done) else 1
                result.hops.append(sum(hop.reason in HAND_BACK_REASONS for hop in done.trace.hops))

        watcher = asyncio.create_task(watch())
        await asyncio.gather(*(caller(i) for i in range(LONG_CALLERS)))
        await watcher
    return result


def long_load_process(url: str, stop: Event, out: Queue[Any]) -> None:
    """Child process entry point: says it is running, then reports its LongCalls once stopped."""
    out.put("started")
    out.put(asyncio.run(long_load(url, stop)))


async def measure(cluster: LocalCluster, rate: float, window: float, *, loaded: bool) -> Measured:
    url = cluster.mcp_url
    await open_loop(url, echo_request, rate=rate, duration=0.5)  # connections to every worker, warm code paths
    if not loaded:
        return Measured(await open_loop(url, echo_request, rate=rate, duration=window, check=is_complete))
    context = multiprocessing.get_context("spawn")
    stop, out = context.Event(), context.Queue()
    child = context.Process(target=long_load_process, args=(url, stop, out))
    child.start()
    try:
        await asyncio.to_thread(out.get, True, 60)
        await asyncio.sleep(WARMUP)
        before = await asyncio.to_thread(_counters, cluster)
        echo = await open_loop(url, echo_request, rate=rate, duration=window, check=is_complete)
        after = await asyncio.to_thread(_counters, cluster)
    finally:
        stop.set()
    long: LongCalls = await asyncio.to_thread(out.get, True, 120)  # in-flight calls finish: the next run starts idle
    await asyncio.to_thread(child.join)
    seconds = after[2] - before[2]
    return Measured(echo, long, (after[0] - before[0]) / seconds, (after[1] - before[1]) / seconds)


def _counters(cluster: LocalCluster) -> tuple[float, float, float]:
    return steps_executed(cluster), proxy_responses(cluster), time.monotonic()


def main() -> int:
    options = parser(__doc__, duration=8.0, duration_help="seconds of short calls per measurement")
    options.add_argument("--rate", type=float, default=50.0, help="short calls per second (default 50)")
    args = options.parse_args()
    results: dict[str, Measured] = {}
    with clusters(*MODES.values(), workers=WORKERS) as started:
        by_mode = dict(zip(MODES, started, strict=True))
        results["idle (no long calls)"] = asyncio.run(
            measure(by_mode["shedding on"], args.rate, min(args.duration, 3.0), loaded=False)
        )
        for mode, cluster in by_mode.items():
            results[mode] = asyncio.run(measure(cluster, args.rate, args.duration, loaded=True))
    publish("short-call-latency", report(results, args.rate, args.duration), write=not args.no_report)
    return 1 if any(m.echo.errors or m.long.errors for m in results.values()) else 0


def report(results: dict[str, Measured], rate: float, window: float) -> list[str]:
    lines = [
        "## Short-call latency under long-call saturation: shedding on and off",
        "",
        f"`echo` calls at {rate:g}/s (open loop: latency counts from the planned send time, so a stall shows) "
        f"through the proxy of three workers for {window:g} s, while {LONG_CALLERS} concurrent callers (twice the "
        f"{WORKERS} x {SLOTS} computation slots, in a child process) keep calling `count_primes`; the same "
        "offered load with `MRTR_WORKER_SHEDDING` true and false, each on its own cluster, one after the "
        "other, after an idle baseline. **Steps/s** (from the workers' counters) and **proxy requests/s** (all "
        "requests, the short calls included) are for the window; long calls are counted over the whole run, "
        "warm-up and tail included, and every answer is checked; hops are the hand-backs per long call.",
        "",
    ]
    rows = []
    for name, m in results.items():
        e = m.echo
        long: tuple[object, ...] = ("-", "-", "-", "-")
        if m.long.calls:
            hops = f"{median(m.long.hops):.0f} / {max(m.long.hops)}"
            long = (m.long.calls, f"{m.steps_per_s:.1f}", f"{m.proxy_rps:.0f}", hops)
        short = (f"{e.p50:.1f}", f"{e.percentile(99):.1f}", f"{max(e.latencies_ms, default=0):.1f}")
        rows.append((name, e.requests, *short, e.errors, *long))
    columns = [
        "load", "short calls", "p50 ms", "p99 ms", "max ms", "errors", "long calls done", "steps/s",
        "proxy requests/s", "hops per long call p50 / max",
    ]  # fmt: skip
    lines += markdown_table(columns, "lrrrrrrrrl", rows)
    on, off = results["shedding on"].echo, results["shedding off"].echo
    lines += [
        "",
        f"Shedding on / off: p50 {on.p50:.1f} / {off.p50:.1f} ms, p99 {on.percentile(99):.1f} / "
        f"{off.percentile(99):.1f} ms (no target was set; measured for comparison).",
    ]
    errors = sum(m.echo.errors + m.long.errors for m in results.values())
    if errors:
        lines.append(f"**{errors} call(s) failed or gave a wrong answer.**")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
