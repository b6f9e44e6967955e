"""A small closed-loop HTTP load generator and process CPU accounting, shared by the benchmarks.

aiohttp's client is used because it keeps up with a local server on two
cores where httpx's pool does not (see services/lb/README.md). Figures are
only compared within one run, side by side, never against fixed numbers.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

RequestFactory = Callable[[int], tuple[bytes, dict[str, str]]]


@dataclass
class LoadResult:
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies_ms) if self.latencies_ms else float("nan")


async def closed_loop(
    url: str, make: RequestFactory, *, concurrency: int, duration: float, check: Callable[[bytes], bool] | None = None
) -> LoadResult:
    """`concurrency` clients each sending one request after another for `duration` seconds."""
    result = LoadResult()
    deadline = time.perf_counter() + duration
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one_client(worker_index: int) -> None:
            n = worker_index
            while time.perf_counter() < deadline:
                body, headers = make(n)
                n += concurrency
                started = time.perf_counter()
                try:
                    async with session.post(url, data=body, headers=headers) as response:
                        payload = await response.read()
                        ok = response.status == 200 and (check is None or check(payload))
                except aiohttp.ClientError:
                    ok = False
                result.latencies_ms.append((time.perf_counter() - started) * 1000)
                result.requests += 1
                result.errors += 0 if ok else 1

        started = time.perf_counter()
        await asyncio.gather(*(one_client(i) for i in range(concurrency)))
        result.seconds = time.perf_counter() - started
    return result


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")
