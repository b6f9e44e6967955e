"""Clusters, long calls and their checks, shared by the cluster benchmarks.

Every benchmark starts its own proxy and workers on 127.0.0.1 (free ports,
a temporary work dir) through `LocalCluster`, exactly as `scripts/cluster`
does, so the figures are those of the real processes. A benchmark may run
several clusters side by side so that its variants are measured
interleaved in one run, on the same machine state.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._load import cpu_seconds
from mrtr_client import CallResult, RetryPolicy
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.local.process import ManagedProcess
from mrtr_worker.compute import primes

TOOL_PACKS = ("demo", "compute")

PATIENT = RetryPolicy(max_rounds=10_000, max_delivery_failures=16)
"""Benchmarks force many hops on purpose; the default cap of 32 rounds would end such calls early."""


@dataclass(frozen=True)
class PrimesCall:
    """One `count_primes` call whose answer is known in advance (`primes.KNOWN_COUNTS`)."""

    limit: int
    segment: int

    def __post_init__(self) -> None:
        # Answers are checked on the callers' threads, where a missing count would only end the thread.
        if self.limit not in primes.KNOWN_COUNTS:
            raise ValueError(f"no known count of primes up to {self.limit:,}: use one of {sorted(primes.KNOWN_COUNTS)}")

    @property
    def arguments(self) -> dict[str, Any]:
        return {"limit": self.limit, "segment": self.segment}

    @property
    def steps(self) -> int:
        """Steps the call takes in all, wherever they run."""
        return primes.total_steps(primes.initial(self.arguments))

    def correct(self, done: CallResult) -> bool:
        return bool(done.structured == {"count": primes.KNOWN_COUNTS[self.limit]})


MIX = (PrimesCall(20_000_000, 2_500_000), PrimesCall(50_000_000, 2_500_000), PrimesCall(100_000_000, 2_500_000))
"""Long calls of 8, 20 and 40 steps of a few tens of milliseconds, used in turn by the load benchmarks."""


def bare_step_ms(call: PrimesCall) -> float:
    """Mean milliseconds of one step of `call` run in this process: the work itself, nothing around it."""
    state = primes.initial(call.arguments)
    primes.step(state)  # the base primes are computed once per process
    started = time.perf_counter()
    steps = 0
    while not primes.done(state):
        state = primes.step(state)
        steps += 1
    assert state["count"] == primes.KNOWN_COUNTS[call.limit]
    return (time.perf_counter() - started) * 1000 / steps


@contextmanager
def clusters(*worker_envs: dict[str, str], workers: int = 3) -> Iterator[list[LocalCluster]]:
    """One cluster (proxy + `workers` workers) per environment, all stopped at the end.

    Clusters start one after another (each boots its workers in parallel): a
    dozen processes importing at once on two cores can outlast the readiness
    timeout when the machine is busy. The work dir (logs, key ring) is
    removed afterwards unless something failed.
    """
    work = Path(tempfile.mkdtemp(prefix="mrtr-bench-"))
    started = [
        LocalCluster(
            ClusterConfig(workers=workers, port=0, tool_packs=TOOL_PACKS, work_dir=work / f"c{i}", worker_env=env)
        )
        for i, env in enumerate(worker_envs)
    ]
    failed = True
    try:
        for cluster in started:
            cluster.start()
        yield started
        failed = False
    finally:
        with ThreadPoolExecutor(len(started)) as pool:
            list(pool.map(stop_cluster, started))
        if failed:
            print(f"logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def stop_cluster(cluster: LocalCluster) -> None:
    """Stop a cluster, then end whatever its workers' step pools left behind (see `stop_process`)."""
    leftovers = [child for handle in cluster.workers.values() for child in _children(handle.process.pid)]
    cluster.stop()
    _end(leftovers)


def stop_process(process: ManagedProcess) -> None:
    """Stop a worker process, then end the step-pool processes it leaves behind.

    A worker stopped by SIGTERM ends by the signal uvicorn re-raises after its
    graceful shutdown, so exit handlers never join its process pool: the pool
    processes (and multiprocessing's resource tracker) would outlive it, idle,
    for good. The benchmarks end the ones they started; the real fix belongs
    in the worker (end or join the pool in `Engine.stop`).
    """
    leftovers = _children(process.pid) if process.popen is not None else []
    process.stop()
    _end(leftovers)


def _children(pid: int) -> list[int]:
    """Child process ids of `pid` (Linux /proc); empty once it is gone."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        return [int(child) for task in tasks for child in (task / "children").read_text().split()]
    except OSError:
        return []


def _end(pids: list[int]) -> None:
    _signal(pids, signal.SIGTERM)


def _signal(pids: list[int], signum: signal.Signals) -> None:
    """Send `signum` to each of `pids`, those already gone aside."""
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signum)


def steps_executed(cluster: LocalCluster, tool: str = "count_primes") -> float:
    """Computation steps the cluster's workers have run so far (their own counters)."""
    return sum(cluster.worker_metric(i, "mrtr_worker_compute_steps_total", tool=tool) for i in cluster.workers)


def proxy_responses(cluster: LocalCluster) -> float:
    """Responses the proxy has sent so far, of any status (its own counter)."""
    return cluster.lb.metrics().value("mrtr_lb_responses_total")


def proxy_cpu(cluster: LocalCluster) -> float:
    """CPU seconds the proxy process has used so far."""
    return cpu_seconds(cluster.proxy_pid)


def workers_cpu(cluster: LocalCluster) -> float:
    """CPU seconds of the workers' main processes (HTTP, MCP, sealing), their step pools not included."""
    return sum(cpu_seconds(handle.process.pid) for handle in cluster.workers.values())


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def verdict(met: bool) -> str:
    return "met" if met else "**not met**"
