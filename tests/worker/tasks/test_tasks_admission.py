"""Task slices and MRTR computations share the engine's compute slots, so shedding sees the real load.

A worker running a task slice refuses a new MRTR computation at admission like any busy worker (a
real worker process); a worker whose slots MRTR computations hold takes no slice from the queue, and a
call queued for a slot ends a running slice at its next boundary after the minimum slice (in-process: the
engine with a step executor the test drives, the runner on it, a real Redis).
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import httpx

from mrtr_ops.local.redis import RedisServer
from mrtr_ops.metrics_page import MetricsPage
from mrtr_ops.waiting import wait_until, wait_until_async
from mrtr_protocol.rounds import ROUND_META_KEY
from mrtr_worker.compute.engine import Engine
from mrtr_worker.compute.primes import COUNT_PRIMES, KNOWN_COUNTS
from mrtr_worker.lifecycle import Lifecycle
from mrtr_worker.metrics import WorkerMetrics
from mrtr_worker.packs.registry import job_named
from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.keyring import new_ring
from mrtr_worker.sealing.layout import StateLayout
from mrtr_worker.tasks.record import READABLE_RECORD_FORMATS, TaskRecord
from mrtr_worker.tasks.runner import RunnerParts, RunnerTiming, TaskRunner
from mrtr_worker.tasks.sealing import RecordSealer
from mrtr_worker.tasks.store import Stored, TaskStore, now_ms
from mrtr_worker.tasks.wire import Status
from mrtr_worker.tool_api.rounds import WorkerInstance
from tests.conftest import StartWorker
from tests.worker.compute.test_engine import (
    FakeClock,
    InlineExecutor,
    ManualExecutor,
    complete,
    counting,
    make_engine,
    make_round,
)
from tests.worker.tasks.tasks_support import TaskClient

WAIT = 60.0
"""Only guards against a hang; never a speed assertion."""
NO_TASKS: dict[str, Any] = {"elicitation": {}}
"""A call that does not declare the tasks extension: plain MRTR rounds."""


def _metric(url: str, name: str) -> float:
    return MetricsPage.parse(httpx.get(f"{url}/metrics", timeout=30).text).value(name)


def test_a_worker_running_a_task_slice_refuses_an_mrtr_computation_at_admission(
    start_worker: StartWorker, redis_server: RedisServer
) -> None:
    env = {
        "MRTR_WORKER_REDIS_URL": redis_server.url,
        "MRTR_WORKER_REDIS_PREFIX": f"admission-{secrets.token_hex(4)}:",
        "MRTR_WORKER_MAX_CONCURRENT_COMPUTATIONS": "1",
        # One slice holds the slot for up to a minute: no gap between slices for the call to land in.
        "MRTR_WORKER_TASK_SLICE_MS": "60000",
        "MRTR_WORKER_TASK_LEASE_MS": "120000",
    }
    spec, _ = start_worker(tool_packs=("compute",), env=env)
    client = TaskClient(spec.url)
    try:
        task_id = client.create("count_primes", {"limit": 2_000_000_000})
        wait_until(lambda: _metric(spec.url, "mrtr_worker_task_slots") == 1, timeout=WAIT, what="the slice's slot")

        refused = client.call_tool("count_primes", {"limit": 1_000_000}, capabilities=NO_TASKS)
        assert refused["resultType"] == "input_required", refused
        assert refused["_meta"][ROUND_META_KEY]["reason"] == "admission"

        client.cancel(task_id)
        wait_until(lambda: _metric(spec.url, "mrtr_worker_task_slots") == 0, timeout=WAIT, what="the slot back")
        done = client.call_tool("count_primes", {"limit": 1_000_000}, capabilities=NO_TASKS)
        assert done["resultType"] == "complete", done  # the same call, once the slice let go of the slot
        assert done["structuredContent"] == {"count": KNOWN_COUNTS[1_000_000]}
        assert client.wait_status(task_id)["status"] == "cancelled"
    finally:
        client.close()


def _store(url: str) -> TaskStore:
    sealer = RecordSealer(FleetStateCodec(new_ring("k"), max_token_bytes=1 << 20), READABLE_RECORD_FORMATS[1])
    return TaskStore.connect(url, sealer, prefix=f"admission-{secrets.token_hex(4)}:")


def _runner(store: TaskStore, engine: Engine, metrics: WorkerMetrics) -> TaskRunner:
    return TaskRunner(
        RunnerParts(
            store,
            WorkerInstance("w-inproc", 1, StateLayout(1)),
            Lifecycle(),
            engine,
            metrics,
            job_named,
            policy=engine.policy,
            slots=engine.slots,
        ),
        RunnerTiming(concurrency=2, slice_ms=1000, lease_ms=5000, poll_ms=50),
    )


def _record(arguments: dict[str, Any]) -> TaskRecord:
    now = now_ms()
    state = COUNT_PRIMES.initial(arguments)
    return TaskRecord(secrets.token_urlsafe(24), None, "count_primes", state, Status.WORKING, now, now, 60_000, 500)


def _count(metrics: WorkerMetrics, outcome: str) -> float:
    return metrics.registry.get_sample_value("mrtr_worker_task_slices_total", {"outcome": outcome}) or 0.0


async def _true(value: bool) -> bool:
    return value


def test_a_worker_whose_slots_mrtr_computations_hold_takes_no_slice(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        clock, executor = FakeClock(), ManualExecutor()
        engine, metrics = make_engine(executor, clock, max_concurrent=1)
        store = _store(redis_server.url)
        runner = _runner(store, engine, metrics)
        call = asyncio.create_task(engine.run(make_round(), counting(clock), {"n": 3}))
        first = await executor.next_step()  # the call holds the only slot, mid-step
        await runner.start()
        pump: asyncio.Task[None] | None = None
        try:
            await wait_until_async(lambda: _true(runner.held_back), timeout=WAIT, what="the runner to hold back")
            record = _record({"limit": 1_000_000, "segment": 250_000})
            await store.create(record, max_live=10)
            assert runner.held_back
            await store.ensure_group()  # the runner has not read the queue yet, so not created it either
            pending: Any = await store.client.xpending(store.stream, "workers")
            assert pending["pending"] == 0  # the slice waits in the queue for a worker with a free slot
            stored = await store.load(record.task_id)
            assert stored is not None
            assert (stored.record.slices, stored.record.steps) == (0, 0)

            first.run()

            async def run_steps() -> None:
                while True:
                    await executor.run_step()

            pump = asyncio.create_task(run_steps())
            result, _ = complete(await asyncio.wait_for(call, WAIT))
            assert result == {"counted": 3}

            async def finished() -> Stored | None:
                now = await store.load(record.task_id)
                return now if now is not None and now.record.terminal else None

            done = await wait_until_async(finished, timeout=WAIT, what="the task to finish once the slot is free")
            assert done.record.result is not None
            assert done.record.result["structuredContent"] == {"count": KNOWN_COUNTS[1_000_000]}
        finally:
            if pump is not None:
                pump.cancel()
            await runner.stop()
            await store.close()

    asyncio.run(scenario())


def test_a_call_queued_for_the_slot_ends_a_task_slice_after_the_minimum_slice(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        engine, metrics = make_engine(InlineExecutor(), FakeClock(), max_concurrent=1, min_slice_ms=200)
        store = _store(redis_server.url)
        runner = _runner(store, engine, metrics)
        record = _record({"limit": 2_000_000_000, "segment": 10_000})  # far more than one slice of small steps
        await store.create(record, max_live=10)
        await runner.start()
        try:
            await wait_until_async(
                lambda: _true(metrics.registry.get_sample_value("mrtr_worker_task_slots") == 1),
                timeout=WAIT,
                what="the slice to hold the slot",
            )
            await asyncio.wait_for(engine.slots.acquire(), WAIT)  # a prioritized call, queued: it gets the slot
            try:
                assert _count(metrics, "pressure") == 1
                # The slice went back on the queue, and the runner takes none while the call holds the slot.
                await wait_until_async(lambda: _true(runner.held_back), timeout=WAIT, what="the runner to hold back")
                stored = await store.load(record.task_id)
                assert stored is not None
                assert stored.record.status is Status.WORKING
                assert stored.record.steps > 0
                expected = f"{stored.record.steps} steps done; last slice on w-inproc (pressure)"
                assert stored.record.status_message == expected
            finally:
                engine.slots.release()
        finally:
            await runner.stop()
            await store.close()

    asyncio.run(scenario())


def test_calls_that_keep_every_slot_busy_leave_a_task_its_turn_in_the_line(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        engine, metrics = make_engine(InlineExecutor(), FakeClock(), max_concurrent=1)
        slots = engine.slots
        store = _store(redis_server.url)
        runner = _runner(store, engine, metrics)
        await asyncio.wait_for(slots.acquire(), WAIT)  # a call holds the only slot
        queued_call = asyncio.create_task(slots.acquire())  # and another waits for it: a fleet full of calls
        await wait_until_async(lambda: _true(slots.waiting == 1), timeout=WAIT, what="the second call to queue")
        record = _record({"limit": 1_000_000, "segment": 250_000})
        await store.create(record, max_live=10)
        await runner.start()
        try:
            await wait_until_async(
                lambda: _true(slots.queued == 2), timeout=WAIT, what="the runner to take its turn in the line"
            )
            assert slots.waiting == 1, "the turn is quiet: the computation holding the slot is not asked to yield"
            stored = await store.load(record.task_id)
            assert stored is not None
            assert stored.record.steps == 0

            slots.release()  # the first call ends: its slot goes to the call that queued before the task
            await asyncio.wait_for(queued_call, WAIT)
            assert slots.queued == 1
            assert _count(metrics, "turn") == 0

            slots.release()  # the second call ends: the task's turn

            async def finished() -> Stored | None:
                now = await store.load(record.task_id)
                return now if now is not None and now.record.terminal else None

            done = await wait_until_async(finished, timeout=WAIT, what="the task to run in its turn")
            assert done.record.result is not None
            assert done.record.result["structuredContent"] == {"count": KNOWN_COUNTS[1_000_000]}
            assert _count(metrics, "turn") == 1
            await wait_until_async(
                lambda: _true(slots.available), timeout=WAIT, what="the turn's slot to be given back"
            )
        finally:
            await runner.stop()
            await store.close()

    asyncio.run(scenario())


def test_a_slice_taken_in_the_line_runs_its_whole_slice_though_calls_queue(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        engine, metrics = make_engine(InlineExecutor(), FakeClock(), max_concurrent=1, min_slice_ms=200)
        slots = engine.slots
        store = _store(redis_server.url)
        runner = _runner(store, engine, metrics)
        await asyncio.wait_for(slots.acquire(), WAIT)  # a call holds the only slot
        record = _record({"limit": 2_000_000_000, "segment": 10_000})  # far more than one slice of small steps
        await store.create(record, max_live=10)
        await runner.start()
        try:
            await wait_until_async(lambda: _true(slots.queued == 1), timeout=WAIT, what="the runner's turn in line")
            slots.release()  # the call ends: the slot is the task's
            await wait_until_async(
                lambda: _true(metrics.registry.get_sample_value("mrtr_worker_task_slots") == 1),
                timeout=WAIT,
                what="the slice to hold the slot",
            )
            queued = asyncio.create_task(slots.acquire())  # a call queues behind the slice
            await asyncio.wait_for(queued, WAIT)  # it gets the slot when the slice has run its whole length
            try:
                assert _count(metrics, "pressure") == 0
                assert _count(metrics, "turn") == 1
                stored = await store.load(record.task_id)
                assert stored is not None
                expected = f"{stored.record.steps} steps done; last slice on w-inproc"  # its own end, no "(pressure)"
                assert stored.record.status_message == expected
            finally:
                slots.release()
        finally:
            await runner.stop()
            await store.close()

    asyncio.run(scenario())


def test_calls_churning_through_the_slot_do_not_put_off_a_tasks_turn(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        engine, metrics = make_engine(InlineExecutor(), FakeClock(), max_concurrent=1)
        slots = engine.slots
        store = _store(redis_server.url)
        runner = _runner(store, engine, metrics)
        await asyncio.wait_for(slots.acquire(), WAIT)  # a call holds the only slot
        record = _record({"limit": 1_000_000, "segment": 250_000})
        await store.create(record, max_live=10)

        async def churn() -> None:
            """Short calls one after another: the slot is free for an instant, then taken again, until the task
            queues for it (each wake-up of the runner must not restart its patience)."""
            while slots.queued == 0:
                slots.release()
                assert slots.try_acquire()
                await asyncio.sleep(0.05)  # the next call's arrival, not a wait for readiness

        await runner.start()
        try:
            await asyncio.wait_for(churn(), WAIT)
            assert slots.queued == 1
            slots.release()  # the call ends: the task's turn

            async def finished() -> Stored | None:
                now = await store.load(record.task_id)
                return now if now is not None and now.record.terminal else None

            done = await wait_until_async(finished, timeout=WAIT, what="the task to run in its turn")
            assert done.record.result is not None
            assert _count(metrics, "turn") == 1
        finally:
            await runner.stop()
            await store.close()

    asyncio.run(scenario())
