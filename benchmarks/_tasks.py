"""The task store seen from outside, and one recovery trial: what `benchmarks.tasks` measures through Redis.

Recovery is timed against the store itself: the slice of a task is one
pending message in the workers' consumer group, held by the instance
running it (XPENDING names it), every slice a worker begins bumps the task's
fencing token (`lease` in its hash, with `holder` naming the worker:
`mrtr_worker.tasks.leases`), and every write of the task bumps its `rev`.
After a `kill -9` of that instance, the message changes hands when a
survivor claims it (it saw the victim's connections gone:
`mrtr_worker.tasks.presence`), the task's next step starts when the
survivor begins the slice (the token moves, `holder` names it), and `rev`
moves when the survivor writes the task again (its next checkpoint, or the
result). Reading Redis every few milliseconds adds no load worth counting,
and unlike a metric scrape it cannot miss the moment.
"""

from __future__ import annotations

import os
import random
import signal
import time
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import httpx
import redis

from benchmarks._cluster import PrimesCall, _children
from benchmarks._load import cpu_seconds
from mrtr_client import Client, RetryPolicy
from mrtr_ops.local.cluster import LocalCluster
from mrtr_ops.waiting import wait_until
from mrtr_protocol import events
from mrtr_protocol.tasks import COMPUTE_META_KEY, TASK_RESULT_TYPE, with_tasks
from mrtr_protocol.wire import encode_request, request_headers, request_meta
from mrtr_worker.tasks.store import GROUP

PREFIX = "bench:"
"""The workers' key prefix (`MRTR_WORKER_REDIS_PREFIX`), so the benchmark knows where the task store writes."""
CHECKPOINT_METRIC = "mrtr_worker_task_checkpoint_seconds"
"""The runner's histogram of slice-end writes (seal + one Redis transaction)."""

_POLL_SECONDS = 0.005


@dataclass(frozen=True)
class Recovery:
    """One kill -9 of the instance running a task, and what the store saw afterwards (seconds from the kill)."""

    victim: str
    taken_over: float
    """A survivor claimed the slice (the message changed hands)."""
    next_step: float
    """A survivor began the slice (its fencing token): the task's next step starts there at once."""
    rewritten: float
    """A survivor wrote the task (checkpoint or result): the work is safe again."""
    correct: bool
    """The task then completed with the exact count and the exact number of steps."""
    record_bytes: int
    """Size of the task's sealed record in Redis at the kill (what every checkpoint writes)."""


class TaskStoreView:
    """Read-only looks into the cluster's Redis: who holds a task's slice, and the task's revision."""

    def __init__(self, url: str) -> None:
        self._redis = redis.Redis.from_url(url, decode_responses=True)
        self._stream = f"{PREFIX}slices"

    def close(self) -> None:
        self._redis.close()

    def holder(self) -> tuple[str, str] | None:
        """(message id, consumer) of the one pending slice, if exactly one is leased."""
        pending: Any = self._redis.xpending_range(self._stream, GROUP, min="-", max="+", count=2)
        if len(pending) != 1:
            return None
        return str(pending[0]["message_id"]), str(pending[0]["consumer"])

    def holder_of(self, message_id: str) -> str | None:
        """The consumer that holds `message_id` now, or None once it is acknowledged."""
        pending: Any = self._redis.xpending_range(self._stream, GROUP, min=message_id, max=message_id, count=1)
        return str(pending[0]["consumer"]) if pending else None

    def record_bytes(self, task_id: str) -> int:
        return int(self._redis.hstrlen(f"{PREFIX}task:{task_id}", "rec"))

    def lease(self, task_id: str) -> tuple[int, str | None]:
        """The task's fencing token and the worker that began its last slice (`tasks.leases`)."""
        values: Any = self._redis.hmget(f"{PREFIX}task:{task_id}", ["lease", "holder"])
        return int(values[0] or 0), values[1]

    def rev(self, task_id: str) -> int:
        value = self._redis.hget(f"{PREFIX}task:{task_id}", "rev")
        return int(str(value)) if value is not None else 0


def create_task(url: str, call: PrimesCall, request_id: int) -> str:
    """Create a `count_primes` task through the proxy (a bare `tools/call` declaring the extension); its id."""
    params = {"_meta": request_meta(with_tasks({})), "name": "count_primes", "arguments": call.arguments}
    reply = httpx.post(
        url,
        content=encode_request(request_id, "tools/call", params),
        headers=request_headers("tools/call", params),
        timeout=60,
    )
    message = events.response(reply.headers.get("content-type", ""), reply.content)
    result = (message or {}).get("result") or {}
    if result.get("resultType") != TASK_RESULT_TYPE:
        raise RuntimeError(f"count_primes did not become a task: HTTP {reply.status_code} {reply.text[:200]}")
    return str(result["taskId"])


def kill_instance(cluster: LocalCluster, instance_id: str) -> None:
    """SIGKILL a worker and its step pool at once, as the death of its container would."""
    pool = _children(cluster.workers[instance_id].process.pid)
    cluster.kill_worker(instance_id)
    for pid in pool:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def recover_once(
    cluster: LocalCluster, view: TaskStoreView, call: PrimesCall, *, slice_ms: int, lease_ms: int, attempt: int
) -> Recovery | None:
    """Create a task, kill the instance running it mid-slice, time the takeover; None if the kill missed.

    The kill lands at a random point of a slice (between a fifth and four
    fifths of it): it misses when the slice ended just before, which the
    store shows (the message left the victim before it died).
    """
    task_id = create_task(cluster.mcp_url, call, 1_000 + attempt)
    held = wait_until(view.holder, timeout=60, interval=_POLL_SECONDS, what=f"a worker to take task {task_id}")
    time.sleep(random.uniform(0.2, 0.8) * slice_ms / 1000)  # a point inside the slice, not a wait for readiness
    message_id, victim = view.holder() or held
    rev, size = view.rev(task_id), view.record_bytes(task_id)
    token, _ = view.lease(task_id)
    kill_instance(cluster, victim)
    killed = time.monotonic()
    if view.holder_of(message_id) != victim or view.rev(task_id) != rev:
        _finish(cluster, task_id, call)
        return None
    timeout = 3 * lease_ms / 1000 + 60
    wait_until(
        lambda: view.holder_of(message_id) not in (victim,),
        timeout=timeout,
        interval=_POLL_SECONDS,
        what=f"a survivor to take over task {task_id}",
    )
    taken_over = time.monotonic() - killed

    def begun_elsewhere() -> bool:
        now, holder = view.lease(task_id)
        return (now > token and holder != victim) or view.rev(task_id) > rev

    wait_until(begun_elsewhere, timeout=timeout, interval=_POLL_SECONDS, what=f"task {task_id} to go on elsewhere")
    next_step = time.monotonic() - killed
    wait_until(lambda: view.rev(task_id) > rev, timeout=timeout, interval=_POLL_SECONDS, what=f"task {task_id} again")
    rewritten = time.monotonic() - killed
    return Recovery(victim, taken_over, next_step, rewritten, _finish(cluster, task_id, call), size)


def _finish(cluster: LocalCluster, task_id: str, call: PrimesCall) -> bool:
    """Follow the task to its end through the proxy: the exact count, and every step counted exactly once."""
    with Client(cluster.mcp_url, policy=RetryPolicy(max_rounds=10_000, max_delivery_failures=16)) as client:
        done = client.wait_task(task_id)
    compute = (done.result.get("_meta") or {}).get(COMPUTE_META_KEY) or {}
    return call.correct(done) and compute.get("steps") == call.steps


def checkpoint_totals(cluster: LocalCluster) -> tuple[float, float, dict[float, float]]:
    """(seconds, writes, cumulative count per bucket bound) of the slice-end writes of every live worker so far."""
    seconds = writes = 0.0
    buckets: dict[float, float] = {}
    for instance in cluster.workers:
        page = cluster.worker_metrics(instance)
        seconds += page.value(f"{CHECKPOINT_METRIC}_sum")
        writes += page.value(f"{CHECKPOINT_METRIC}_count")
        for bound, count in page.by_label(f"{CHECKPOINT_METRIC}_bucket", "le").items():
            buckets[float(bound)] = buckets.get(float(bound), 0.0) + count
    return seconds, writes, buckets


def cluster_cpu(cluster: LocalCluster) -> float:
    """CPU seconds used so far by the proxy, Redis, and every live worker with its step pool (Linux /proc)."""
    pids = [cluster.proxy_pid, *([cluster.redis.pid] if cluster.redis is not None and cluster.redis.pid else [])]
    for handle in cluster.workers.values():
        pids += [handle.process.pid, *_children(handle.process.pid)]
    total = 0.0
    for pid in pids:
        with suppress(OSError):
            total += cpu_seconds(pid)
    return total
