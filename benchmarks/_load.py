"""Small HTTP load generators (closed and open loop) and process CPU accounting, shared by the benchmarks.

aiohttp's client is used because it keeps up with a local server on two
cores where httpx's pool does not (see services/lb/README.md). Figures are
only compared within one run, side by side, never against fixed numbers.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import aiohttp

from mrtr_ops.percentiles import percentile
from mrtr_protocol import events
from mrtr_protocol.rounds import COMPLETE, end_reason
from mrtr_protocol.wire import encode_request, request_headers, request_meta

RequestFactory = Callable[[int], tuple[bytes, dict[str, str]]]

META = request_meta(capabilities={})
ECHO_HEADERS = request_headers("tools/call", {"name": "echo"})
"""Framed once (`mrtr_protocol.wire`): the load loops send them with every request."""


def echo_request(n: int) -> tuple[bytes, dict[str, str]]:
    """The trivial `tools/call` (the `echo` tool): one round, no computation, the cheapest MCP call."""
    params = {"_meta": META, "name": "echo", "arguments": {"text": f"hello {n}"}}
    return encode_request(n, "tools/call", params), ECHO_HEADERS


def is_complete(content_type: str, payload: bytes) -> bool:
    """The reply is a complete result (read with `mrtr_protocol`, as every client here reads replies)."""
    try:
        message = events.response(content_type, payload)
    except ValueError:
        return False
    result = message.get("result") if message is not None else None
    return isinstance(result, dict) and end_reason(result) == COMPLETE


@dataclass(frozen=True)
class Sent:
    """One open-loop request: when it was planned (`time.monotonic()`), its latency from then, and whether it
    succeeded."""

    planned: float
    latency_ms: float
    ok: bool


@dataclass
class LoadResult:
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    """Each request of an open loop (`open_loop`), in the order answered."""

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile(self, p: int) -> float:
        """The `p`-th latency percentile in ms (`mrtr_ops.percentiles`: linear between the closest ranks)."""
        return percentile(self.latencies_ms, p)

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies_ms) if self.latencies_ms else float("nan")


async def closed_loop(
    url: str | Sequence[str],
    make: RequestFactory,
    *,
    concurrency: int,
    duration: float,
    check: Callable[[str, bytes], bool] | None = None,
) -> LoadResult:
    """`concurrency` clients each sending one request after another for `duration` seconds.

    Several URLs are used in turn, request by request: client-side round robin,
    the baseline a proxy is compared with.
    """
    urls = [url] if isinstance(url, str) else list(url)
    turn = itertools.count()
    result = LoadResult()
    deadline = time.perf_counter() + duration
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one_client(worker_index: int) -> None:
            n = worker_index
            while time.perf_counter() < deadline:
                body, headers = make(n)
                n += concurrency
                target = urls[next(turn) % len(urls)]
                started = time.perf_counter()
                try:
                    async with session.post(target, data=body, headers=headers) as response:
                        payload = await response.read()
                        ok = response.status == 200 and (check is None or check(response.content_type, payload))
                except aiohttp.ClientError:
                    ok = False
                result.latencies_ms.append((time.perf_counter() - started) * 1000)
                result.requests += 1
                result.errors += 0 if ok else 1

        started = time.perf_counter()
        await asyncio.gather(*(one_client(i) for i in range(concurrency)))
        result.seconds = time.perf_counter() - started
    return result


async def open_loop(
    url: str,
    make: RequestFactory,
    *,
    rate: float,
    duration: float,
    check: Callable[[str, bytes], bool] | None = None,
    starting_at: float | None = None,
) -> LoadResult:
    """Requests sent at a fixed rate whatever the answers do; latency counts from the planned send time.

    Unlike a closed loop, a slow answer does not hold back the next request,
    so a stall shows up in the tail instead of hiding (no coordinated omission).
    `starting_at` (`time.monotonic()`, default now) lines the schedule up with load sent from elsewhere.
    """
    result = LoadResult()
    interval = 1.0 / rate
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(n: int, planned: float) -> None:
            body, headers = make(n)
            try:
                async with session.post(url, data=body, headers=headers) as response:
                    payload = await response.read()
                    ok = response.status == 200 and (check is None or check(response.content_type, payload))
            except aiohttp.ClientError:
                ok = False
            latency_ms = (time.monotonic() - planned) * 1000
            result.latencies_ms.append(latency_ms)
            result.sent.append(Sent(planned, latency_ms, ok))
            result.requests += 1
            result.errors += 0 if ok else 1

        started = time.monotonic() if starting_at is None else starting_at
        tasks = []
        for n in range(int(duration * rate)):
            planned = started + n * interval
            await asyncio.sleep(max(0.0, planned - time.monotonic()))
            tasks.append(asyncio.create_task(one(n, planned)))
        await asyncio.gather(*tasks)
        result.seconds = time.monotonic() - started
    return result


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")
