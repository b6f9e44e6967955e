"""The straggler rule for task slices: the pace in the checkpoint, the move, and what shows it.

The decisions are tables in test_policy.py. Here the runner's wiring against a real Redis: in-process
runners whose step pools the test slows (deterministic: the test takes the moved slice itself), then two
real worker processes with one throttled by a SIGSTOP/SIGCONT duty cycle, as lab/mrtr_lab/straggler.py does.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx
import pytest

from benchmarks._throttle import Throttle
from mrtr_ops.local.redis import RedisServer
from mrtr_ops.metrics_page import MetricsPage
from mrtr_ops.waiting import wait_until_async
from mrtr_worker.compute.computation import State
from mrtr_worker.compute.policy import SheddingPolicy, SheddingSettings
from mrtr_worker.compute.primes import COUNT_PRIMES, KNOWN_COUNTS
from mrtr_worker.lifecycle import Lifecycle
from mrtr_worker.metrics import WorkerMetrics
from mrtr_worker.packs.registry import job_named
from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.keyring import new_ring
from mrtr_worker.sealing.layout import Pace, StateLayout
from mrtr_worker.tasks.record import READABLE_RECORD_FORMATS, TaskRecord
from mrtr_worker.tasks.runner import RunnerParts, RunnerTiming, TaskRunner
from mrtr_worker.tasks.sealing import RecordSealer
from mrtr_worker.tasks.store import Stored, TaskStore, now_ms
from mrtr_worker.tasks.wire import Status
from mrtr_worker.tool_api.rounds import WorkerInstance
from tests.conftest import StartWorker
from tests.worker.tasks.tasks_support import TaskClient

WAIT = 60.0
"""Only guards against a hang; never a speed assertion."""
ARGUMENTS = {"limit": 2_000_000, "segment": 100_000}
"""20 small steps."""
FAST_BEFORE = Pace(rate=1000.0, samples=2)
"""What the task's earlier slices saw: far above what a pool that sleeps 200 ms a step can do."""


class Pool:
    """Runs a step inline, after `delay` seconds on the event loop (a slow instance, as the runner sees it)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    async def run_step(self, step: Callable[[State], State], state: State) -> State:
        if self.delay:
            await asyncio.sleep(self.delay)
        return step(state)


def _store(url: str, prefix: str) -> TaskStore:
    sealer = RecordSealer(FleetStateCodec(new_ring("k"), max_token_bytes=1 << 20), READABLE_RECORD_FORMATS[1])
    return TaskStore.connect(url, sealer, prefix=prefix)


def _runner(store: TaskStore, name: str, pool: Pool) -> tuple[TaskRunner, WorkerMetrics]:
    metrics = WorkerMetrics()
    runner = TaskRunner(
        RunnerParts(
            store,
            WorkerInstance(name, 1, StateLayout(1)),
            Lifecycle(),
            pool,
            metrics,
            job_named,
            policy=SheddingPolicy(SheddingSettings()),
        ),
        RunnerTiming(
            concurrency=1,  # its consume loop reads the queue only between slices: the test can read first
            slice_ms=1000,  # measured over 500 ms
            lease_ms=5000,
            poll_ms=50,
        ),
    )
    return runner, metrics


def _record() -> TaskRecord:
    now = now_ms()
    state = COUNT_PRIMES.initial(ARGUMENTS)
    return TaskRecord(secrets.token_urlsafe(24), None, "count_primes", state, Status.WORKING, now, now, 60_000, 500)


def _count(metrics: WorkerMetrics, outcome: str) -> float:
    return metrics.registry.get_sample_value("mrtr_worker_task_slices_total", {"outcome": outcome}) or 0.0


async def _finished(store: TaskStore, task_id: str) -> Stored:
    async def done() -> Stored | None:
        stored = await store.load(task_id)
        return stored if stored is not None and stored.record.terminal else None

    return await wait_until_async(done, timeout=WAIT, interval=0.05, what=f"task {task_id} to finish")


def _exact(stored: Stored) -> dict[str, Any]:
    assert stored.record.status is Status.COMPLETED
    assert stored.record.result is not None
    assert stored.record.result["structuredContent"] == {"count": KNOWN_COUNTS[2_000_000]}
    assert stored.record.steps == COUNT_PRIMES.total_steps(COUNT_PRIMES.initial(ARGUMENTS))
    meta: dict[str, Any] = stored.record.result["_meta"]["mrtr-cluster.dev/compute"]
    return meta


def test_a_slice_well_below_the_task_pace_goes_back_on_the_queue_showing_the_move(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        store = _store(redis_server.url, f"straggler-{secrets.token_hex(4)}:")
        await store.heartbeat("peer")  # the test is a second worker: the slow one is not alone
        record = replace(_record(), pace=FAST_BEFORE)
        await store.create(record, max_live=10)
        slow, slow_metrics = _runner(store, "w-slow", Pool(delay=0.2))
        fast, _ = _runner(store, "w-fast", Pool())
        await slow.start()
        try:
            await wait_until_async(
                lambda: _true(slow.running_slices == 1), timeout=WAIT, interval=0.01, what="the slow runner's slice"
            )
            # Blocked on the queue before the slow runner comes back to it (it reads only between slices).
            moved = await asyncio.wait_for(store.take("peer", int(WAIT * 1000)), WAIT)
            assert moved is not None
            assert moved.task_id == record.task_id

            stored = await store.load(record.task_id)
            assert stored is not None
            after = stored.record
            assert after.status is Status.WORKING
            assert 0 < after.steps < 5  # ended at the first boundary after 500 ms measured, not at 1000 ms
            assert after.moves == 1
            assert after.pace == Pace(rate=1000.0, samples=2, moves=1, fled="w-slow")  # its own rate left out
            assert after.status_message is not None
            assert after.status_message.startswith(f"{after.steps} steps done; moved off w-slow: ")
            assert after.status_message.endswith("steps/s here, 1000.0 before")
            # Counted once its commit returns, which may be just after the test saw the queued slice.
            await wait_until_async(
                lambda: _true(_count(slow_metrics, "straggler") == 1), timeout=WAIT, interval=0.01, what="the count"
            )
            assert _count(slow_metrics, "requeued") == 0

            await store.put_back(moved)  # the test was only looking: a fast worker takes it from here
            await fast.start()
            meta = _exact(await _finished(store, record.task_id))
        finally:
            await slow.stop()
            await fast.stop()
            await store.close()
        assert meta["moves"] >= 1  # more if the slow runner took it back (each one a move, at most 3 in a row)
        assert ["w-fast", 1] in meta["visited"]

    asyncio.run(scenario())


async def _true(value: bool) -> bool:
    return value


async def _finish_alone(store: TaskStore, alone: TaskRunner) -> dict[str, Any]:
    """One task that ran fast before, run to its end by `alone`, the only runner; its exact result's meta."""
    record = replace(_record(), pace=FAST_BEFORE)
    await store.create(record, max_live=10)
    await alone.start()
    try:
        return _exact(await _finished(store, record.task_id))
    finally:
        await alone.stop()
        await store.close()


def test_a_runner_alone_runs_its_slices_to_their_end_however_slow(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        store = _store(redis_server.url, f"straggler-{secrets.token_hex(4)}:")
        alone, metrics = _runner(store, "w-alone", Pool(delay=0.05))
        meta = await _finish_alone(store, alone)
        assert meta["moves"] == 0
        assert _count(metrics, "straggler") == 0
        assert _count(metrics, "requeued") == meta["slices"] - 1  # every slice ran to its end

    asyncio.run(scenario())


async def _slow_runner(store: TaskStore, name: str) -> tuple[TaskRunner, WorkerMetrics]:
    """A runner whose step pool sleeps, already believing it steps count_primes at 1 step/s."""
    runner, metrics = _runner(store, name, Pool(delay=0.05))
    for _ in range(2):
        runner.standing.observe("count_primes", 1, 1000, asyncio.get_running_loop().time())
    return runner, metrics


def _pull_waits(metrics: WorkerMetrics) -> float:
    return metrics.registry.get_sample_value("mrtr_worker_task_pull_waits_total") or 0.0


def test_the_store_tells_peer_rates_and_how_long_the_oldest_slice_waits(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        store = _store(redis_server.url, f"straggler-{secrets.token_hex(4)}:")
        try:
            await store.ensure_group()
            assert await store.oldest_waiting_ms() is None
            await store.heartbeat("w1", {"count_primes": 4.0})
            await store.heartbeat("w2")  # an older build, or one that measured nothing
            await store.heartbeat("w3", {})
            assert sorted(map(str, await store.peer_rates("w3", 60_000))) == ["{'count_primes': 4.0}", "{}"]
            await store.client.zadd(store.runners, {"w1": now_ms() - 120_000})  # w1 went quiet two minutes ago
            assert await store.peer_rates("w3", 60_000) == [{}]
            assert await store.client.hkeys(store.runner_rates) == ["w3"]  # w1's rates removed, w3's own kept
            await store.create(_record(), max_live=10)
            waited = await store.oldest_waiting_ms()
            assert waited is not None
            assert waited >= 0
            taken = await store.take("w1", 10)
            assert taken is not None
            assert await store.oldest_waiting_ms() is None  # taken (pending) is not waiting
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_runner_that_measured_itself_slow_leaves_a_fresh_slice_and_keeps_a_late_one(
    redis_server: RedisServer,
) -> None:
    async def scenario() -> None:
        store = _store(redis_server.url, f"straggler-{secrets.token_hex(4)}:")
        await store.ensure_group()
        await store.heartbeat("peer", {"count_primes": 1000.0})  # the test: a fast peer
        slow, metrics = await _slow_runner(store, "w-slow")
        await slow.start()
        try:
            # Once it has looked at the queue and left it, it is no longer blocked on a read from before it knew.
            await wait_until_async(
                lambda: _true(_pull_waits(metrics) >= 1), timeout=WAIT, interval=0.01, what="w-slow to hold back"
            )
            # The peer is blocked on the queue before the task exists: it gets the fresh slice, never w-slow.
            peer_take = asyncio.create_task(store.take("peer", int(WAIT * 1000)))
            record = replace(_record(), pace=FAST_BEFORE)  # judged by it, w-slow would move the slice at once
            await store.create(record, max_live=10)
            fresh = await asyncio.wait_for(peer_take, WAIT)
            assert fresh is not None
            assert fresh.task_id == record.task_id
            assert slow.running_slices == 0

            await store.put_back(fresh)  # the peer stays busy: the slice waits a whole slice, then w-slow runs it
            meta = _exact(await _finished(store, record.task_id))
        finally:
            await slow.stop()
            await store.close()
        assert meta["moves"] == 0  # a late slice is kept, not moved off to wait at the back of the queue again
        assert {instance for instance, _ in meta["visited"]} == {"w-slow"}
        assert _count(metrics, "straggler") == 0
        assert metrics.registry.get_sample_value("mrtr_worker_task_straggling") == 1

    asyncio.run(scenario())


def test_a_runner_as_fast_as_its_peers_does_not_move_a_slice_below_the_task_pace(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        store = _store(redis_server.url, f"straggler-{secrets.token_hex(4)}:")
        await store.ensure_group()
        await store.heartbeat("peer", {"count_primes": 1.0})  # the peer is as slow: the whole fleet is
        runner, metrics = await _slow_runner(store, "w-busy-host")
        await runner.start()
        try:
            await wait_until_async(
                lambda: _true(runner.peer_rates is not None), timeout=WAIT, interval=0.01, what="the peers' rates"
            )
            record = replace(_record(), pace=FAST_BEFORE)  # judged by the task's pace alone, it would move
            await store.create(record, max_live=10)
            meta = _exact(await _finished(store, record.task_id))
        finally:
            await runner.stop()
            await store.close()
        assert meta["moves"] == 0
        assert _count(metrics, "straggler") == 0
        assert _pull_waits(metrics) == 0

    asyncio.run(scenario())


def test_a_slow_runner_alone_takes_every_slice_at_once(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        store = _store(redis_server.url, f"straggler-{secrets.token_hex(4)}:")
        alone, metrics = await _slow_runner(store, "w-alone")
        meta = await _finish_alone(store, alone)
        assert meta["moves"] == 0
        assert _pull_waits(metrics) == 0

    asyncio.run(scenario())


# -- two worker processes, one throttled -------------------------------------------------------------------

PROCESS_ARGUMENTS = {"limit": 200_000_000, "segment": 1_000_000}
"""200 steps: many slices per task. With 50, the fast worker finished each task in its second slice, before the
throttled one had measured itself against it, so the straggler rule was never exercised."""
TASKS = 3


@pytest.fixture(scope="module")
def two_workers(start_worker: StartWorker, redis_server: RedisServer) -> tuple[str, str, int]:
    """(fast URL, slow URL, slow worker's pid): two compute workers on one task queue, 400 ms slices."""
    env = {
        "MRTR_WORKER_REDIS_URL": redis_server.url,
        "MRTR_WORKER_REDIS_PREFIX": f"straggler-{secrets.token_hex(4)}:",
        "MRTR_WORKER_TASK_SLICE_MS": "400",
    }
    fast, _ = start_worker(tool_packs=("compute",), env=env)
    slow, process = start_worker(tool_packs=("compute",), env=env)
    return fast.url, slow.url, process.pid


def _page(url: str) -> MetricsPage:
    return MetricsPage.parse(httpx.get(f"{url}/metrics", timeout=30).text)


def _metric(url: str, outcome: str) -> float:
    return _page(url).value("mrtr_worker_task_slices_total", outcome=outcome)


def test_task_slices_move_off_a_throttled_worker_and_the_results_are_exact(two_workers: tuple[str, str, int]) -> None:
    fast_url, slow_url, slow_pid = two_workers
    client = TaskClient(fast_url)
    try:
        with Throttle(slow_pid):  # a quarter of its speed, step pool included
            ids = [client.create("count_primes", PROCESS_ARGUMENTS) for _ in range(TASKS)]
            done = [client.wait_status(task_id, "completed", "failed", timeout=180) for task_id in ids]
    finally:
        client.close()
    moves = 0
    for task in done:
        assert task["status"] == "completed", task
        assert task["result"]["structuredContent"] == {"count": KNOWN_COUNTS[200_000_000]}
        meta = task["result"]["_meta"]["mrtr-cluster.dev/compute"]
        assert meta["steps"] == 200
        moves += meta["moves"]
    slow_moves, fast_moves = _metric(slow_url, "straggler"), _metric(fast_url, "straggler")
    held_back = _page(slow_url).value("mrtr_worker_task_pull_waits_total")
    assert slow_moves + held_back >= 1  # the throttled worker handed slices on, or left them to the fast one
    assert _page(fast_url).value("mrtr_worker_task_pull_waits_total") == 0  # the fast one never held back
    assert moves == slow_moves + fast_moves  # and every move shows in its task's result
