"""What a proxy adds to the trivial call: direct to the workers, through our proxy and through HAProxy, in one run.

Three workers serve the `echo` tool (one round, no computation). The same
load reaches them five ways: directly (the load generator itself takes the
workers in turn); through `mrtr_lb` (the cluster's proxy, access log on) and
a second one with the access log off; and through HAProxy configured as
services/lb/README.md asks of any replacement (round robin, no stickiness,
/readyz health checks, keep-alive), once logging every request to stdout as
ours does (`option httplog`, what the compose profile runs) and once logging
nothing. Each proxy is compared with the HAProxy that logs as it does.
Latency is measured with one client at a time, throughput with many; the
cells are interleaved over several short rounds (the order reversed every
other round) so that drift in the machine's load hits every path alike, and
each like-for-like throughput ratio is taken per round, from two cells
measured seconds apart: the report gives their median and their spread, so
a difference smaller than the run's own noise shows as such. The proxies' own CPU per request is read from /proc,
and the upstream connections each holds after its throughput cell from
/proc/net/tcp.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import _haproxy, _syscalls
from benchmarks._cluster import clusters, verdict
from benchmarks._load import LoadResult, closed_loop, cpu_seconds, echo_request, is_complete
from benchmarks.report import markdown_table, parser, publish
from mrtr_ops.local.process import LOOPBACK, ManagedProcess, free_port

DIRECT, LEAN, LEAN_QUIET, HAPROXY_LOG, HAPROXY = (
    "direct (client round robin)",
    "mrtr_lb, access log (default)",
    "mrtr_lb, no access log",
    "HAProxy, access log (httplog to stdout)",
    "HAProxy, no log",
)
LIKE_FOR_LIKE = {LEAN: HAPROXY_LOG, LEAN_QUIET: HAPROXY}
"""Each of our proxies against the HAProxy that logs as it does."""
THROUGHPUT_TARGET = 1.0
CPU_TARGET = 2.0
ADDED_P50_TARGET_MS = 0.5


def lb_process(name: str, port: int, backends: list[str], work_dir: Path, **settings: str) -> ManagedProcess:
    """Another mrtr_lb in front of the same workers (the cluster's own is the one with its access log)."""
    admin_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MRTR_LB_")}
    env.update(MRTR_LB_HOST=LOOPBACK, MRTR_LB_PORT=str(port), MRTR_LB_BACKENDS=",".join(backends))
    env.update(MRTR_LB_ADMIN_PORT=str(admin_port))
    env.update({f"MRTR_LB_{key.upper()}": value for key, value in settings.items()})
    work_dir.mkdir(parents=True, exist_ok=True)
    return ManagedProcess(
        name=name,
        argv=[sys.executable, "-m", "mrtr_lb"],
        env=env,
        log_path=work_dir / f"{name}.log",
        ready_url=f"http://{LOOPBACK}:{admin_port}/lb/healthz",
    )


def upstream_connections(pid: int, ports: set[int]) -> int:
    """Established TCP connections of process ``pid`` to any of ``ports`` (from /proc: no tools needed)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "01" and fields[9] in inodes and int(fields[2].rsplit(":", 1)[1], 16) in ports:
                count += 1
    return count


@dataclass
class Route:
    """One way to reach the workers and what was measured on it."""

    urls: list[str]
    cpu: float | None = None
    """The proxy process's CPU seconds over the throughput cells (None: no proxy)."""
    upstream: list[int] = field(default_factory=list)
    """Connections the proxy held to the workers right after each throughput cell."""
    latency: LoadResult = field(default_factory=LoadResult)
    throughput: LoadResult = field(default_factory=LoadResult)
    rounds: list[float] = field(default_factory=list)
    """Requests/s of each round's throughput cell, in round order."""
    syscalls: _syscalls.Syscalls | None = None
    """The proxy's system calls over one extra throughput cell (`strace -c`), if strace could count them."""


def _add(total: LoadResult, part: LoadResult) -> None:
    total.requests += part.requests
    total.errors += part.errors
    total.seconds += part.seconds
    total.latencies_ms += part.latencies_ms


async def _cell(urls: list[str], concurrency: int, duration: float, pid: int | None = None) -> tuple[LoadResult, float]:
    """One cell after a short warm-up, and the CPU seconds `pid` (the proxy) used in it, the warm-up left out: its
    requests are not counted, so its CPU would inflate the CPU per request (by a quarter with 2 s cells)."""
    await closed_loop(urls, echo_request, concurrency=concurrency, duration=min(0.5, duration))  # warm-up
    before = cpu_seconds(pid) if pid else 0.0
    cell = await closed_loop(urls, echo_request, concurrency=concurrency, duration=duration, check=is_complete)
    return cell, (cpu_seconds(pid) - before if pid else 0.0)


def main() -> int:
    options = parser(__doc__, duration=2.0, duration_help="seconds per cell (5 paths x 2 loads x rounds)")
    options.add_argument("--rounds", type=int, default=6, help="interleaved rounds of every cell (default 6)")
    options.add_argument("--concurrency", type=int, default=32, help="clients for the throughput cells (default 32)")
    options.add_argument("--no-install", action="store_true", help="do not apt-get install haproxy if it is missing")
    args = options.parse_args()
    binary, how = _haproxy.ensure_installed(install=not args.no_install)
    if binary is None:
        print(f"HAProxy row unavailable: {how}")
    paths: dict[str, Route] = {}
    with clusters({}, workers=3) as (cluster,):
        backends = [handle.url for handle in cluster.workers.values()]
        worker_ports = {int(url.rsplit(":", 1)[1]) for url in backends}
        work = Path(cluster.config.work_dir)
        paths[DIRECT] = Route([f"{url}/mcp" for url in backends])
        paths[LEAN] = Route([cluster.mcp_url])
        pid_of: dict[str, int] = {LEAN: cluster.proxy_pid}
        children: list[ManagedProcess] = []
        try:
            extra: list[tuple[str, Callable[[int], ManagedProcess]]] = [
                (LEAN_QUIET, lambda port: lb_process("lb-quiet", port, backends, work / "quiet", log_level="WARNING")),
            ]
            if binary is not None:
                extra += [
                    (HAPROXY_LOG, lambda port: _haproxy.process(binary, port, backends, work / "hl", access_log=True)),
                    (HAPROXY, lambda port: _haproxy.process(binary, port, backends, work / "haproxy")),
                ]
            for name, make in extra:
                port = free_port()
                child = make(port).start()
                children.append(child)
                child.wait_ready()
                paths[name] = Route([f"http://{LOOPBACK}:{port}/mcp"])
                pid_of[name] = child.pid
            for round_ in range(args.rounds):
                order = list(paths.items()) if round_ % 2 == 0 else list(reversed(paths.items()))
                for _, path in order:
                    _add(path.latency, asyncio.run(_cell(path.urls, 1, args.duration))[0])
                for name, path in order:
                    pid = pid_of.get(name)
                    cell, cpu = asyncio.run(_cell(path.urls, args.concurrency, args.duration, pid))
                    _add(path.throughput, cell)
                    path.rounds.append(cell.rps)
                    if pid:
                        path.cpu = (path.cpu or 0.0) + cpu
                        path.upstream.append(upstream_connections(pid, worker_ports))
            for name, pid in pid_of.items():
                paths[name].syscalls = _syscalls.count(pid, _counted_cell(paths[name].urls, args))
        finally:
            for child in children:
                child.stop()
    lines = report(paths, args.duration, args.rounds, args.concurrency, None if binary is not None else how)
    publish("proxy", lines, write=not args.no_report)
    return 1 if any(p.latency.errors or p.throughput.errors for p in paths.values()) else 0


def _counted_cell(urls: list[str], args: argparse.Namespace) -> Callable[[], int]:
    """A throughput cell for `_syscalls.count`: the requests it made."""

    def run() -> int:
        cell = closed_loop(urls, echo_request, concurrency=args.concurrency, duration=args.duration)
        return asyncio.run(cell).requests

    return run


def report(
    paths: dict[str, Route], duration: float, rounds: int, concurrency: int, unavailable: str | None
) -> list[str]:
    direct_p50 = paths[DIRECT].latency.p50
    lines = [
        "## Proxy: what a balancer adds to the trivial `tools/call`",
        "",
        "Three workers answer `echo` (one round, no computation). **Latency**: one client, one call after "
        f"another; **throughput**: {concurrency} concurrent clients, closed loop; {rounds} x {duration:g} s "
        "per cell, interleaved (the order reversed every other round); a throughput ratio is the median of "
        "the rounds' ratios, each from two cells measured seconds apart, with the rounds' spread beside it. "
        "**Direct** is the load generator taking the workers in turn itself; HAProxy is set up "
        "as services/lb/README.md asks of any replacement balancer (round robin, no stickiness, /readyz "
        "health checks, keep-alive). **Like for like**: mrtr_lb writes one access-log line per request by "
        "default, so it is compared with an HAProxy that does too (`option httplog` to stdout, as the compose "
        "profile's HAProxy runs); the quiet mrtr_lb is compared with an HAProxy that logs nothing. "
        "Everything shares the machine's two cores with the load generator, so "
        "throughput is what the whole box does, and a proxy's CPU per request is what it takes from the "
        "workers. **Added p50** is the path's median latency minus the direct one; at one client it moves by a "
        "few tenths of a millisecond from run to run. "
        "The proxies' CPU per request is the steadier comparison. **Upstream connections**: those the proxy "
        "held to the workers right after each throughput cell (direct: one per client connection, "
        f"{concurrency} spread over the workers).",
        "",
    ]
    rows: list[tuple[object, ...]] = []
    for name, path in paths.items():
        lat, thr = path.latency, path.throughput
        added = "-" if name == DIRECT else f"{lat.p50 - direct_p50:.2f}"
        cpu = "-" if path.cpu is None or not thr.requests else f"{_cpu_ms(path):.3f}"
        upstream = "/".join(str(n) for n in path.upstream) or "-"
        rows.append(
            (
                name,
                f"{lat.p50:.2f}",
                f"{lat.percentile(99):.2f}",
                added,
                f"{thr.rps:.0f}",
                f"{thr.p50:.2f}",
                cpu,
                upstream,
                lat.errors + thr.errors,
            )
        )
    if unavailable is not None:
        rows.append(("HAProxy", f"unavailable: {unavailable}", *[""] * 7))
    columns = [
        "path", "p50 ms (1 client)", "p99 ms (1 client)", "added p50 ms", f"requests/s ({concurrency} clients)",
        f"p50 ms ({concurrency} clients)", "proxy CPU ms/request", "upstream connections", "errors",
    ]  # fmt: skip
    lines += markdown_table(columns, "lrrrrrrrr", rows)
    lines.append("")
    for name in (LEAN, LEAN_QUIET):
        extra_ms = paths[name].latency.p50 - direct_p50
        lines.append(
            f"Added p50 of {name} vs direct: {extra_ms:.2f} ms; target ≤ {ADDED_P50_TARGET_MS} ms: "
            f"{verdict(extra_ms <= ADDED_P50_TARGET_MS)}."
        )
    if HAPROXY in paths:
        for name, reference in LIKE_FOR_LIKE.items():
            pairs = pair_ratios(paths[name], paths[reference])
            ratio = statistics.median(pairs)
            lines.append(
                f"{name} vs {reference}: throughput {ratio:.2f}x, the median of {len(pairs)} rounds' ratios "
                f"({_spread(pairs)}; target ≥ {THROUGHPUT_TARGET}: {verdict(ratio >= THROUGHPUT_TARGET)}"
                f"{_decided(pairs)}); CPU per request {_cpu_ratio(paths[name], paths[reference])}."
            )
        lines.append(
            f"What one access-log line costs per request: mrtr_lb {_log_cost(paths[LEAN], paths[LEAN_QUIET])}, "
            f"HAProxy {_log_cost(paths[HAPROXY_LOG], paths[HAPROXY])}."
        )
    else:
        lines.append("Throughput against HAProxy: not measured (HAProxy unavailable).")
    lines.append(_syscall_line(paths))
    return lines


def _syscall_line(paths: dict[str, Route]) -> str:
    """Where a proxy's CPU goes: the kernel's share shows as system calls per request."""
    counted = {name: path.syscalls for name, path in paths.items() if path.syscalls is not None}
    if not counted:
        why = "strace could not attach" if _syscalls.available() else "strace is not installed"
        return f"System calls per request: not counted ({why})."
    each = "; ".join(f"{name} {calls.summary()}" for name, calls in counted.items())
    return (
        "System calls per request (`strace -c` on the proxy over one extra throughput cell each, futex waits "
        f"left out; in brackets writes, reads, polls): {each}."
    )


def pair_ratios(ours: Route, reference: Route) -> list[float]:
    """Our requests/s over the reference's, round by round: each pair measured seconds apart."""
    return [mine / theirs for mine, theirs in zip(ours.rounds, reference.rounds, strict=True) if theirs]


def _spread(pairs: list[float]) -> str:
    ordered = sorted(pairs)
    return f"pairs {ordered[0]:.2f}-{ordered[-1]:.2f}: " + " ".join(f"{r:.2f}" for r in pairs)


def _decided(pairs: list[float]) -> str:
    """How many rounds agree with the target: a median among rounds that disagree is within this run's noise."""
    above = sum(1 for r in pairs if r >= THROUGHPUT_TARGET)
    if above == len(pairs):
        return ", every round at or above it"
    if above == 0:
        return ", no round at or above it"
    return f", {above} of {len(pairs)} rounds at or above it"


def _cpu_ms(path: Route) -> float:
    return (path.cpu or 0.0) / path.throughput.requests * 1000 if path.throughput.requests else 0.0


def _log_cost(logging: Route, quiet: Route) -> str:
    """CPU ms per request with the log minus without it (noisy: a difference of two measurements)."""
    if not (logging.cpu and quiet.cpu and logging.throughput.requests and quiet.throughput.requests):
        return "not measured"
    return f"{_cpu_ms(logging) - _cpu_ms(quiet):+.3f} ms CPU"


def _cpu_ratio(ours: Route, reference: Route) -> str:
    """Our CPU per request over the reference's, with its verdict; '-' when either was not measured."""
    if not (ours.cpu and reference.cpu and ours.throughput.requests and reference.throughput.requests):
        return "not measured"
    ratio = (ours.cpu / ours.throughput.requests) / (reference.cpu / reference.throughput.requests)
    return f"{ratio:.2f}x (target ≤ {CPU_TARGET:g}x: {verdict(ratio <= CPU_TARGET)})"


if __name__ == "__main__":
    raise SystemExit(main())
