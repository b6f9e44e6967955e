"""What the MCP layer costs: a trivial `tools/call` on our worker against its peers.

Every server runs as a single uvicorn process on loopback and answers the
same `echo` call: our worker; the MCP SDK's own bare stateless app
(`benchmarks/_peers/sdk_app.py`) answering JSON, the target's reference, and
the same app in the SDK's default mode, which defers every answer to a
possible event stream (the worker keeps that for computations, whose long
rounds stream pings, and answers quiet tools such as `echo` as JSON:
`mrtr_worker.edge.quiet_calls`); FastMCP 4 on the
same 2026-07-28 wire (`benchmarks/_peers/fastmcp_app.py`, when the `bench`
dependency group is installed); and a bare FastAPI endpoint that parses the
same JSON-RPC body with no MCP at all (`benchmarks/bare_app.py`). The load
generator runs in this process. Reported: requests per second and CPU
milliseconds per request (the server process's own user+system time, so the
load generator's share does not count), and the ratios, from one interleaved run.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

from benchmarks._cluster import stop_process
from benchmarks._load import LoadResult, closed_loop, cpu_seconds, echo_request, is_complete
from benchmarks.report import markdown_table, parser, publish
from mrtr_ops.local.process import ManagedProcess, WorkerSpec, free_port
from mrtr_worker.sealing.keyring import new_ring

WORKER = "mrtr worker"
SDK = "MCP SDK bare stateless app (JSON answers)"
SDK_SSE = "MCP SDK bare stateless app (its default: event-stream deferral)"
FASTMCP = "FastMCP 4"
FASTAPI = "bare FastAPI (no MCP)"
TARGET_CPU_RATIO = 1.2
"""Issue 13: the worker's CPU per call at most 1.2x the SDK's bare app's."""


async def _measure(process: ManagedProcess, url: str, concurrency: int, duration: float) -> tuple[LoadResult, float]:
    await closed_loop(url, echo_request, concurrency=concurrency, duration=min(1.0, duration))  # warm-up
    before = cpu_seconds(process.pid)
    result = await closed_loop(url, echo_request, concurrency=concurrency, duration=duration, check=is_complete)
    return result, cpu_seconds(process.pid) - before


def _uvicorn(name: str, app: str, work: Path) -> tuple[ManagedProcess, str]:
    port = free_port()
    process = ManagedProcess(
        name=name,
        argv=[sys.executable, "-m", "uvicorn", app, "--port", str(port), "--log-level", "warning", "--no-access-log"],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        log_path=work / f"{name}.log",
        ready_url=f"http://127.0.0.1:{port}/readyz",
    )
    return process, f"http://127.0.0.1:{port}/mcp"


def _targets(work: Path) -> dict[str, tuple[ManagedProcess, str]]:
    ring = work / "keyring.json"
    ring.write_text(new_ring("bench").dumps())
    spec = WorkerSpec("bench-worker", free_port(), ring)
    targets = {
        WORKER: (spec.process(work), f"{spec.url}/mcp"),
        SDK: _uvicorn("sdk-bare", "benchmarks._peers.sdk_app:app", work),
        SDK_SSE: _uvicorn("sdk-bare-sse", "benchmarks._peers.sdk_app:sse_app", work),
    }
    if importlib.util.find_spec("fastmcp") is not None:
        targets[FASTMCP] = _uvicorn("fastmcp", "benchmarks._peers.fastmcp_app:app", work)
    targets[FASTAPI] = _uvicorn("bare-fastapi", "benchmarks.bare_app:app", work)
    return targets


def main() -> int:
    options = parser(__doc__, duration=5.0, duration_help="seconds per measurement (two per server)")
    options.add_argument("--concurrency", type=int, default=8)
    args = options.parse_args()

    work = Path(tempfile.mkdtemp(prefix="mrtr-bench-"))
    targets = _targets(work)
    totals = {name: (LoadResult(), 0.0) for name in targets}
    try:
        for process, _ in targets.values():
            process.start().wait_ready()
        for _ in range(2):  # interleaved, so drift in machine load hits every server alike
            for name, (process, url) in targets.items():
                result, cpu = asyncio.run(_measure(process, url, args.concurrency, args.duration))
                total, total_cpu = totals[name]
                total.requests += result.requests
                total.errors += result.errors
                total.seconds += result.seconds
                total.latencies_ms += result.latencies_ms
                totals[name] = (total, total_cpu + cpu)
    finally:
        for process, _ in targets.values():
            stop_process(process)

    rows = []
    for name, (result, cpu) in totals.items():
        cpu_ms = cpu / result.requests * 1000 if result.requests else float("nan")
        rows.append((name, result.rps, cpu_ms, result.p50, result.percentile(99), result.errors))
    by_name = {row[0]: row for row in rows}
    worker = by_name[WORKER]
    cpu_ratio = worker[2] / by_name[SDK][2]
    verdict = "met" if cpu_ratio <= TARGET_CPU_RATIO else "**not met**"
    ratios = ", ".join(
        f"{name}: throughput {worker[1] / row[1]:.2f}x, CPU per request {worker[2] / row[2]:.2f}x"
        for name, row in by_name.items()
        if name != WORKER
    )
    missing = "" if FASTMCP in by_name else " (FastMCP 4 left out: install the `bench` dependency group)"
    lines = [
        "## Worker overhead: trivial `tools/call` against the MCP SDK's bare app, FastMCP 4 and bare FastAPI",
        "",
        f"Closed loop, {args.concurrency} concurrent clients, 2 x {args.duration:.0f} s per server, interleaved; "
        "every server answers the same `echo` call on the 2026-07-28 wire, every answer checked. "
        f"CPU is the server process's own time per request.{missing}",
        "",
        *markdown_table(
            ["server", "requests/s", "CPU ms/request", "p50 ms", "p99 ms", "errors"],
            "lrrrrr",
            [(n, f"{rps:.0f}", f"{cpu:.2f}", f"{p50:.2f}", f"{p99:.2f}", err) for n, rps, cpu, p50, p99, err in rows],
        ),
        "",
        f"Worker against each peer: {ratios}.",
        "",
        f"Target: the worker's CPU per call at most {TARGET_CPU_RATIO}x the SDK's bare app's: "
        f"{cpu_ratio:.2f}x, {verdict}.",
    ]
    publish("worker-overhead", lines, write=not args.no_report)
    return 1 if any(row[5] for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
