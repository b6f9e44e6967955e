"""What a proxy adds to the trivial call: direct to the workers, through our proxy and through HAProxy, in one run.

Three workers serve the `echo` tool (one round, no computation). The same
load reaches them four ways: directly (the load generator itself takes the
workers in turn), through `mrtr_lb` on its lean engine (the cluster's proxy,
the default) and on its aiohttp engine (a second proxy beside it), and through HAProxy configured as
services/lb/README.md asks of any replacement (round robin, no stickiness,
/readyz health checks, keep-alive). Latency is measured with one client at
a time, throughput with many; the cells are interleaved over two rounds so
that drift in the machine's load hits every path alike. The proxies' own
CPU per request is read from /proc.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import _haproxy
from benchmarks._cluster import clusters, proxy_cpu, verdict
from benchmarks._load import LoadResult, closed_loop, cpu_seconds, echo_request, is_complete
from benchmarks.report import parser, publish
from mrtr_ops.local.process import LOOPBACK, ManagedProcess, free_port

DIRECT, OURS, LEAN, HAPROXY = (
    "direct (client round robin)",
    "mrtr_lb, aiohttp engine",
    "mrtr_lb, lean engine (uvloop + httptools)",
    "HAProxy",
)
THROUGHPUT_TARGET = 1.0
CPU_TARGET = 2.0
ADDED_P50_TARGET_MS = 0.5


def aiohttp_proxy(port: int, backends: list[str], work_dir: Path) -> ManagedProcess:
    """A second mrtr_lb in front of the same workers, on the aiohttp engine (the cluster's runs the lean one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MRTR_LB_")}
    env.update(
        MRTR_LB_ENGINE="aiohttp",
        MRTR_LB_HOST=LOOPBACK,
        MRTR_LB_PORT=str(port),
        MRTR_LB_BACKENDS=",".join(backends),
    )
    work_dir.mkdir(parents=True, exist_ok=True)
    return ManagedProcess(
        name="lb-aiohttp",
        argv=[sys.executable, "-m", "mrtr_lb"],
        env=env,
        log_path=work_dir / "lb-aiohttp.log",
        ready_url=f"http://{LOOPBACK}:{port}/lb/healthz",
    )


@dataclass
class Route:
    """One way to reach the workers and what was measured on it."""

    urls: list[str]
    cpu: float | None = None
    """The proxy process's CPU seconds over the throughput cells (None: no proxy)."""
    latency: LoadResult = field(default_factory=LoadResult)
    throughput: LoadResult = field(default_factory=LoadResult)


def _add(total: LoadResult, part: LoadResult) -> None:
    total.requests += part.requests
    total.errors += part.errors
    total.seconds += part.seconds
    total.latencies_ms += part.latencies_ms


async def _cell(urls: list[str], concurrency: int, duration: float) -> LoadResult:
    await closed_loop(urls, echo_request, concurrency=concurrency, duration=min(0.5, duration))  # warm-up
    return await closed_loop(urls, echo_request, concurrency=concurrency, duration=duration, check=is_complete)


def main() -> int:
    options = parser(__doc__, duration=3.0, duration_help="seconds per cell (3 paths x 2 loads x 2 rounds)")
    options.add_argument("--concurrency", type=int, default=32, help="clients for the throughput cells (default 32)")
    options.add_argument("--no-install", action="store_true", help="do not apt-get install haproxy if it is missing")
    args = options.parse_args()
    binary, how = _haproxy.ensure_installed(install=not args.no_install)
    if binary is None:
        print(f"HAProxy row unavailable: {how}")
    paths: dict[str, Route] = {}
    os.environ["MRTR_LB_ENGINE"] = "lean"  # the cluster's own proxy; the aiohttp one runs beside it
    with clusters({}, workers=3) as (cluster,):
        backends = [handle.url for handle in cluster.workers.values()]
        paths[DIRECT] = Route([f"{url}/mcp" for url in backends])
        paths[LEAN] = Route([cluster.mcp_url])
        haproxy: ManagedProcess | None = None
        other: ManagedProcess | None = None
        try:
            other_port = free_port()
            other = aiohttp_proxy(other_port, backends, Path(cluster.config.work_dir) / "aiohttp").start()
            other.wait_ready()
            paths[OURS] = Route([f"http://{LOOPBACK}:{other_port}/mcp"])
            other_pid = other.pid
            if binary is not None:
                port = free_port()
                work = Path(cluster.config.work_dir) / "haproxy"
                haproxy = _haproxy.process(binary, port, backends, work).start()
                haproxy.wait_ready()
                paths[HAPROXY] = Route([f"http://{LOOPBACK}:{port}/mcp"])
            cpu_of: dict[str, Callable[[], float]] = {
                OURS: lambda: cpu_seconds(other_pid),
                LEAN: lambda: proxy_cpu(cluster),
            }
            if haproxy is not None:
                haproxy_pid = haproxy.pid
                cpu_of[HAPROXY] = lambda: cpu_seconds(haproxy_pid)
            for _ in range(2):
                for path in paths.values():
                    _add(path.latency, asyncio.run(_cell(path.urls, 1, args.duration)))
                for name, path in paths.items():
                    before = cpu_of[name]() if name in cpu_of else 0.0
                    _add(path.throughput, asyncio.run(_cell(path.urls, args.concurrency, args.duration)))
                    if name in cpu_of:
                        path.cpu = (path.cpu or 0.0) + cpu_of[name]() - before
        finally:
            for child in (haproxy, other):
                if child is not None:
                    child.stop()
    lines = report(paths, args.duration, args.concurrency, None if binary is not None else how)
    publish("proxy", lines, write=not args.no_report)
    return 1 if any(p.latency.errors or p.throughput.errors for p in paths.values()) else 0


def report(paths: dict[str, Route], duration: float, concurrency: int, unavailable: str | None) -> list[str]:
    direct_p50 = paths[DIRECT].latency.p50
    lines = [
        "## Proxy: what a balancer adds to the trivial `tools/call`",
        "",
        "Three workers answer `echo` (one round, no computation). **Latency**: one client, one call after "
        f"another; **throughput**: {concurrency} concurrent clients, closed loop; 2 x {duration:g} s per cell, "
        "interleaved. **Direct** is the load generator taking the workers in turn itself; HAProxy is set up "
        "as services/lb/README.md asks of any replacement balancer (round robin, no stickiness, /readyz "
        "health checks, keep-alive). Everything shares the machine's two cores with the load generator, so "
        "throughput is what the whole box does, and a proxy's CPU per request is what it takes from the "
        "workers. **Added p50** is the path's median latency minus the direct one. Direct is not a free "
        "baseline: uvicorn sends a response's headers and body in two writes, which a client talking to a "
        "worker must read apart; a proxy that passes both on at once spares it that, so a proxy can come out "
        "below direct, and at one client the added p50 moves by a few tenths of a millisecond from run to run. "
        "The proxies' CPU per request is the steadier comparison.",
        "",
        "| path | p50 ms (1 client) | p99 ms (1 client) | added p50 ms | requests/s "
        f"({concurrency} clients) | p50 ms ({concurrency} clients) | proxy CPU ms/request | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, path in paths.items():
        lat, thr = path.latency, path.throughput
        added = "-" if name == DIRECT else f"{lat.p50 - direct_p50:.2f}"
        cpu = "-" if path.cpu is None or not thr.requests else f"{path.cpu / thr.requests * 1000:.3f}"
        lines.append(
            f"| {name} | {lat.p50:.2f} | {lat.percentile(99):.2f} | {added} | {thr.rps:.0f} | {thr.p50:.2f} "
            f"| {cpu} | {lat.errors + thr.errors} |"
        )
    if unavailable is not None:
        lines.append(f"| {HAPROXY} | unavailable: {unavailable} | | | | | | |")
    lines.append("")
    for name in (OURS, LEAN):
        extra_ms = paths[name].latency.p50 - direct_p50
        lines.append(
            f"Added p50 of {name} vs direct: {extra_ms:.2f} ms; target ≤ {ADDED_P50_TARGET_MS} ms: "
            f"{verdict(extra_ms <= ADDED_P50_TARGET_MS)}."
        )
    if HAPROXY in paths:
        for name in (OURS, LEAN):
            ratio = paths[name].throughput.rps / paths[HAPROXY].throughput.rps
            lines.append(
                f"{name}: throughput as a fraction of HAProxy's {ratio:.2f} (target ≥ {THROUGHPUT_TARGET}: "
                f"{verdict(ratio >= THROUGHPUT_TARGET)}); CPU per request vs HAProxy's: "
                f"{_cpu_ratio(paths[name], paths[HAPROXY])}."
            )
    else:
        lines.append("Throughput against HAProxy: not measured (HAProxy unavailable).")
    return lines


def _cpu_ratio(ours: Route, reference: Route) -> str:
    """Our CPU per request over the reference's, with its verdict; '-' when either was not measured."""
    if not (ours.cpu and reference.cpu and ours.throughput.requests and reference.throughput.requests):
        return "not measured"
    ratio = (ours.cpu / ours.throughput.requests) / (reference.cpu / reference.throughput.requests)
    return f"{ratio:.2f}x (target ≤ {CPU_TARGET:g}x: {verdict(ratio <= CPU_TARGET)})"


if __name__ == "__main__":
    raise SystemExit(main())
