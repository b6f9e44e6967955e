"""Tasks through faults, with real processes: Redis down and back, a worker killed mid-slice, a worker drained.

Every wait is on an event (a status on `tasks/get`, a process exit), bounded; nothing sleeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr_ops.local.process import ManagedProcess, WorkerSpec
from mrtr_ops.local.redis import RedisServer
from mrtr_ops.waiting import wait_until
from mrtr_worker.compute.primes import COUNT_PRIMES, KNOWN_COUNTS
from tests.conftest import StartWorker
from tests.worker.tasks_support import RpcError, TaskClient

LONG_COUNT = {"limit": 100_000_000, "segment": 1_000_000}
LONG_COUNT_STEPS = COUNT_PRIMES.total_steps(COUNT_PRIMES.initial(LONG_COUNT))


def _env(url: str, prefix: str, *, lease_ms: int) -> dict[str, str]:
    return {
        "MRTR_WORKER_REDIS_URL": url,
        "MRTR_WORKER_REDIS_PREFIX": prefix,
        "MRTR_WORKER_TASK_LEASE_MS": str(lease_ms),
        "MRTR_WORKER_TASK_SLICE_MS": "500",
    }


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Redis of this module's own, since one test stops and restarts it."""
    server = RedisServer(Path(tmp_path_factory.mktemp("redis-faults"))).start()
    yield server
    server.stop()


def _compute_meta(task: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = task["result"]["_meta"]["mrtr-cluster.dev/compute"]
    return meta


def _running_on(client: TaskClient, task_id: str) -> str:
    """The instance that checkpointed the task last, once it has (from the task's statusMessage)."""
    task = client.wait_status(task_id, "working")
    message = wait_until(
        lambda: client.get(task_id).get("statusMessage"), timeout=30, interval=0.05, what="a first checkpoint"
    )
    assert task["taskId"] == task_id
    return str(message).rsplit(" ", 1)[-1]


def test_redis_down_then_back(start_worker: StartWorker, own_redis: RedisServer) -> None:
    spec, _ = start_worker(tool_packs=("compute", "conformance"), env=_env(own_redis.url, "down:", lease_ms=2000))
    client, plain = TaskClient(spec.url), TaskClient(spec.url, capabilities={})
    try:
        task_id = client.create("slow_compute", {"seconds": 3, "label": "outage"})
        own_redis.stop()
        attempts: list[Callable[[], object]] = [
            lambda: client.get(task_id),
            lambda: client.call_tool("slow_compute", {"seconds": 1}),
        ]
        for attempt in attempts:
            with pytest.raises(RpcError) as raised:
                attempt()
            assert raised.value.code == -32603
            assert raised.value.data == {"reason": "task_store_unavailable", "retryable": True}
            assert "Task store unavailable" in raised.value.message
        assert client.call_tool("greet", {"name": "still here"})["content"][0]["text"] == "Hello, still here!"
        assert plain.call_tool("count_primes", {"limit": 10_000})["structuredContent"] == {"count": 1229}
        ready = wait_until(lambda: _readyz_says(spec, "unreachable"), timeout=30, what="/readyz to report Redis")
        assert ready.status_code == 200  # still ready: everything but tasks works
        own_redis.start()
        done = client.wait_status(task_id, timeout=60)
        assert done["status"] == "completed"
        assert "outage" in done["result"]["content"][0]["text"]
        wait_until(lambda: _readyz_says(spec, "ok"), timeout=30, what="/readyz to see Redis again")
    finally:
        client.close()
        plain.close()


def _readyz_says(spec: WorkerSpec, store: str) -> httpx.Response | None:
    response = httpx.get(f"{spec.url}/readyz", timeout=10)
    return response if response.json()["tasks"].get("store") == store else None


def _pair(start_worker: StartWorker, env: dict[str, str]) -> dict[str, tuple[WorkerSpec, ManagedProcess]]:
    """Two workers sharing one Redis: a version 1 and a version 2 (they share task records)."""
    first = start_worker(tool_packs=("compute",), env=env)
    second = start_worker(version=2, tool_packs=("compute",), env=env)
    return {first[0].instance_id: first, second[0].instance_id: second}


def test_killed_worker_loses_at_most_a_slice(start_worker: StartWorker, redis_server: RedisServer) -> None:
    workers = _pair(start_worker, _env(redis_server.url, "kill:", lease_ms=2000))
    entry = next(iter(workers.values()))[0]
    client = TaskClient(entry.url)
    try:
        task_id = client.create("count_primes", LONG_COUNT)
        victim = _running_on(client, task_id)
        workers[victim][1].kill()  # SIGKILL, mid-slice: its slice stays leased until the lease runs out
        (survivor,) = [spec for name, (spec, _) in workers.items() if name != victim]
        client.close()
        client = TaskClient(survivor.url)
        done = client.wait_status(task_id, timeout=180)
        assert done["result"]["structuredContent"] == {"count": KNOWN_COUNTS[100_000_000]}
        meta = _compute_meta(done)
        assert meta["steps"] == LONG_COUNT_STEPS  # exact: the lost slice's steps were redone, not counted twice
        visited = [name for name, _ in meta["visited"]]
        assert victim in visited
        assert visited[-1] == survivor.instance_id
    finally:
        client.close()


def test_drained_worker_puts_its_slice_back(start_worker: StartWorker, redis_server: RedisServer) -> None:
    # A lease far longer than the test: the task can only finish elsewhere if the drain handed its slice back.
    workers = _pair(start_worker, _env(redis_server.url, "drain:", lease_ms=600_000))
    entry = next(iter(workers.values()))[0]
    client = TaskClient(entry.url)
    try:
        task_id = client.create("count_primes", LONG_COUNT)
        victim = _running_on(client, task_id)
        spec, process = workers[victim]
        assert httpx.post(f"{spec.url}/admin/drain", timeout=10).status_code == 200
        wait_until(lambda: not process.running, timeout=60, what=f"{victim} to exit after its drain")
        assert process.returncode() == 0
        (survivor,) = [s for name, (s, _) in workers.items() if name != victim]
        client.close()
        client = TaskClient(survivor.url)
        done = client.wait_status(task_id, timeout=180)
        assert done["result"]["structuredContent"] == {"count": KNOWN_COUNTS[100_000_000]}
        meta = _compute_meta(done)
        assert meta["steps"] == LONG_COUNT_STEPS
        assert [name for name, _ in meta["visited"]][-1] == survivor.instance_id
    finally:
        client.close()


def test_cancel_stops_a_running_computation(start_worker: StartWorker, redis_server: RedisServer) -> None:
    spec, _ = start_worker(tool_packs=("compute",), env=_env(redis_server.url, "cancel:", lease_ms=2000))
    client = TaskClient(spec.url)
    try:
        task_id = client.create("count_primes", LONG_COUNT)
        _running_on(client, task_id)
        client.cancel(task_id)
        cancelled = client.wait_status(task_id, timeout=10)
        assert cancelled["status"] == "cancelled"
        assert "result" not in cancelled
        assert client.get(task_id)["status"] == "cancelled"  # the runner stopped; it never overwrote the cancel
    finally:
        client.close()
