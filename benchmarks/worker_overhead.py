"""What the MCP layer costs: a trivial `tools/call` on our worker against a bare FastAPI endpoint.

Both servers run as single uvicorn processes on loopback, parse the same
JSON-RPC body and answer the same text; the load generator runs in this
process. Reported: requests per second and CPU milliseconds per request
(the server process's own user+system time, so the load generator's share
does not count), and the ratios between the two, from one interleaved run.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from benchmarks._cluster import stop_process
from benchmarks._load import LoadResult, closed_loop, cpu_seconds, echo_request, is_complete
from benchmarks.report import parser, publish
from mrtr_ops.local.process import ManagedProcess, WorkerSpec, free_port
from mrtr_worker.keyring import new_ring


async def _measure(process: ManagedProcess, url: str, concurrency: int, duration: float) -> tuple[LoadResult, float]:
    await closed_loop(url, echo_request, concurrency=concurrency, duration=min(1.0, duration))  # warm-up
    before = cpu_seconds(process.pid)
    result = await closed_loop(url, echo_request, concurrency=concurrency, duration=duration, check=is_complete)
    return result, cpu_seconds(process.pid) - before


def main() -> int:
    options = parser(__doc__, duration=5.0, duration_help="seconds per measurement (two per server)")
    options.add_argument("--concurrency", type=int, default=8)
    args = options.parse_args()

    work = Path(tempfile.mkdtemp(prefix="mrtr-bench-"))
    ring = work / "keyring.json"
    ring.write_text(new_ring("bench").dumps())
    spec = WorkerSpec("bench-worker", free_port(), ring)
    worker = spec.process(work)
    bare_port = free_port()
    bare = ManagedProcess(
        name="bare-fastapi",
        argv=[
            sys.executable,
            "-m",
            "uvicorn",
            "benchmarks.bare_app:app",
            "--port",
            str(bare_port),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        log_path=work / "bare.log",
        ready_url=f"http://127.0.0.1:{bare_port}/readyz",
    )
    targets = {
        "mrtr worker (MCP SDK)": (worker, f"{spec.url}/mcp"),
        "bare FastAPI": (bare, f"http://127.0.0.1:{bare_port}/mcp"),
    }
    totals = {name: (LoadResult(), 0.0) for name in targets}
    try:
        for process, _ in targets.values():
            process.start().wait_ready()
        for _ in range(2):  # interleaved, so drift in machine load hits both alike
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
    (_, w_rps, w_cpu, *_), (_, b_rps, b_cpu, *_) = rows
    lines = [
        "## Worker overhead: trivial `tools/call` against a bare FastAPI endpoint",
        "",
        f"Closed loop, {args.concurrency} concurrent clients, 2 x {args.duration:.0f} s per server, interleaved. "
        "CPU is the server process's own time per request.",
        "",
        "| server | requests/s | CPU ms/request | p50 ms | p99 ms | errors |",
        "|---|---:|---:|---:|---:|---:|",
        *(f"| {n} | {rps:.0f} | {cpu:.2f} | {p50:.2f} | {p99:.2f} | {err} |" for n, rps, cpu, p50, p99, err in rows),
        "",
        f"Ratio worker/bare: throughput {w_rps / b_rps:.2f}x, CPU per request {w_cpu / b_cpu:.2f}x.",
    ]
    publish("worker-overhead", lines, write=not args.no_report)
    return 1 if any(row[5] for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
