"""The task runner in-process against a real Redis: slices, checkpoints, and what it leaves to other versions.

No worker process: a `TaskStore` and a `TaskRunner` on this test's event loop, compute steps run inline.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from mrtr_ops.local.redis import RedisServer
from mrtr_ops.waiting import wait_until_async
from mrtr_worker.compute.computation import State
from mrtr_worker.compute.primes import COUNT_PRIMES, KNOWN_COUNTS
from mrtr_worker.lifecycle import Lifecycle
from mrtr_worker.metrics import WorkerMetrics
from mrtr_worker.packs.registry import job_named
from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.keyring import new_ring
from mrtr_worker.sealing.layout import StateLayout
from mrtr_worker.tasks.catalog import JOBS
from mrtr_worker.tasks.jobs import Job
from mrtr_worker.tasks.record import READABLE_RECORD_FORMATS, TaskRecord
from mrtr_worker.tasks.runner import RunnerParts, RunnerTiming, TaskRunner
from mrtr_worker.tasks.sealing import RecordSealer
from mrtr_worker.tasks.store import Stored, TaskStore, now_ms
from mrtr_worker.tasks.wire import Status
from mrtr_worker.tool_api.rounds import WorkerInstance


class InlineSteps:
    async def run_step(self, step: Callable[[State], State], state: State) -> State:
        return step(state)


def _parts(url: str) -> tuple[TaskStore, TaskRunner, WorkerMetrics]:
    prefix = f"runner-{secrets.token_hex(4)}:"
    sealer = RecordSealer(FleetStateCodec(new_ring("k"), max_token_bytes=1 << 20), READABLE_RECORD_FORMATS[1])
    store = TaskStore.connect(url, sealer, prefix=prefix)
    metrics = WorkerMetrics()
    identity = WorkerInstance("inproc", 1, StateLayout(1))
    runner = TaskRunner(
        RunnerParts(store, identity, Lifecycle(), InlineSteps(), metrics, job_named),
        RunnerTiming(concurrency=2, slice_ms=50, lease_ms=2000, poll_ms=50),
    )
    return store, runner, metrics


def _record(job: str, arguments: dict[str, Any]) -> TaskRecord:
    now = now_ms()
    state = JOBS[job].initial(arguments) if job in JOBS else {}
    return TaskRecord(secrets.token_urlsafe(24), None, job, state, Status.WORKING, now, now, 60_000, 500)


def _count(metrics: WorkerMetrics, outcome: str) -> float:
    return metrics.registry.get_sample_value("mrtr_worker_task_slices_total", {"outcome": outcome}) or 0.0


def test_slices_checkpoint_and_the_result_is_exact(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        store, runner, metrics = _parts(redis_server.url)
        arguments = {"limit": 5_000_000, "segment": 50_000}
        record = _record("count_primes", arguments)
        await store.create(record, max_live=10)
        await runner.start()
        try:

            async def finished() -> Stored | None:
                stored = await store.load(record.task_id)
                return stored if stored is not None and stored.record.terminal else None

            done = await wait_until_async(finished, timeout=120, interval=0.05, what="the task to finish")
        finally:
            await runner.stop()
            await store.close()
        assert done.record.status is Status.COMPLETED
        assert done.record.result is not None
        assert done.record.result["structuredContent"] == {"count": KNOWN_COUNTS[5_000_000]}
        assert done.record.steps == COUNT_PRIMES.total_steps(COUNT_PRIMES.initial(arguments))
        assert done.record.slices > 1  # several slices, each ending in a checkpoint
        assert _count(metrics, "requeued") == done.record.slices - 1

    asyncio.run(scenario())


def test_a_job_this_version_does_not_know_is_left_to_others(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        store, runner, metrics = _parts(redis_server.url)
        record = replace(_record("count_primes", {"limit": 10}), job="added_in_version_9", state={"x": 1})
        await store.create(record, max_live=10)
        await runner.start()
        try:

            async def left() -> bool:
                return _count(metrics, "left") >= 2  # taken, handed back, taken again: never run, never dropped

            await wait_until_async(left, timeout=30, interval=0.05, what="the slice to be left to others")
        finally:
            await runner.stop()
        stored = await store.load(record.task_id)
        await store.close()
        assert stored is not None
        assert stored.record.status is Status.WORKING
        assert stored.rev == 1  # untouched

    asyncio.run(scenario())


def test_a_job_that_breaks_fails_the_task_once(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken_step(state: State, pool: Any) -> State:
        raise ValueError("a bug in the step")

    broken = Job("broken", lambda a: {}, broken_step, lambda s: False, lambda s: {})
    monkeypatch.setitem(JOBS, "broken", broken)

    async def scenario() -> None:
        store, runner, metrics = _parts(redis_server.url)
        record = _record("broken", {})
        await store.create(record, max_live=10)
        await runner.start()
        try:

            async def failed() -> Stored | None:
                stored = await store.load(record.task_id)
                return stored if stored is not None and stored.record.terminal else None

            done = await wait_until_async(failed, timeout=30, interval=0.05, what="the task to fail")
        finally:
            await runner.stop()
            await store.close()
        assert done.record.status is Status.FAILED
        assert done.record.error == {"code": -32603, "message": "the broken job failed (ValueError)"}
        assert _count(metrics, "failed") == 1

    asyncio.run(scenario())


def test_toxic_jobs_fail_their_task_once_with_a_clear_error_and_the_worker_lives_on(redis_server: RedisServer) -> None:
    """The chaos pack's jobs: one raises, one calls sys.exit(42) (docket's toxic task), one never ends and is
    stopped by the run-time limit. Each ends failed, none is redelivered, and the runner then completes a
    normal task (a SystemExit that escaped would have ended its loops)."""

    async def scenario() -> None:
        prefix = f"toxic-{secrets.token_hex(4)}:"
        sealer = RecordSealer(FleetStateCodec(new_ring("k"), max_token_bytes=1 << 20), READABLE_RECORD_FORMATS[1])
        store = TaskStore.connect(redis_server.url, sealer, prefix=prefix)
        metrics = WorkerMetrics()
        runner = TaskRunner(
            RunnerParts(
                store, WorkerInstance("toxic", 1, StateLayout(1)), Lifecycle(), InlineSteps(), metrics, job_named
            ),
            RunnerTiming(concurrency=3, slice_ms=100, lease_ms=2000, poll_ms=50, max_run_ms=600),
        )
        toxic = {job: _record(job, {}) for job in ("chaos_raise", "chaos_exit", "chaos_forever")}
        for record in toxic.values():
            await store.create(record, max_live=10)
        await runner.start()
        try:
            ended: dict[str, Stored] = {}
            for job, record in toxic.items():
                ended[job] = await _wait_terminal(store, record.task_id)
            normal = _record("count_primes", {"limit": 100_000, "segment": 50_000})
            await store.create(normal, max_live=10)
            after = await _wait_terminal(store, normal.task_id)
        finally:
            await runner.stop()
            await store.close()
        assert after.record.status is Status.COMPLETED
        assert ended["chaos_raise"].record.error == {
            "code": -32603,
            "message": "the chaos_raise job failed (RuntimeError)",
        }
        assert ended["chaos_exit"].record.error == {"code": -32603, "message": "the chaos_exit job failed (SystemExit)"}
        endless = ended["chaos_forever"].record
        assert endless.error is not None
        assert endless.error["data"]["reason"] == "run_time_limit"
        assert endless.error["data"]["limitMs"] == 600
        assert "past the run-time limit of 0.6 s (MRTR_WORKER_TASK_MAX_RUN_MS" in endless.error["message"]
        assert endless.run_ms >= 600
        assert endless.slices >= 2  # it ran over several slices, each committed, none redelivered
        assert all(done.record.status is Status.FAILED for done in ended.values())
        assert _count(metrics, "failed") == 3
        assert _count(metrics, "reclaimed") == 0
        assert _count(metrics, "taken_over") == 0

    asyncio.run(scenario())


async def _wait_terminal(store: TaskStore, task_id: str) -> Stored:
    async def terminal() -> Stored | None:
        stored = await store.load(task_id)
        return stored if stored is not None and stored.record.terminal else None

    return await wait_until_async(terminal, timeout=60, interval=0.05, what=f"task {task_id} to end")
