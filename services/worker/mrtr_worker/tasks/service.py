"""The task methods' logic: create, read, answer, cancel; principal checks and Redis failures in one place.

A Redis error never escapes as a stack trace: every operation turns it into
the one clear "task store unavailable" error, and the rest of the worker
(MRTR calls, discovery, health) keeps working.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from mcp.server.context import ServerRequestContext
from redis.exceptions import RedisError

from mrtr_worker.redis_link import NotReplicated
from mrtr_worker.tasks import errors
from mrtr_worker.tasks.catalog import JobLookup
from mrtr_worker.tasks.principal import principal_of
from mrtr_worker.tasks.record import TaskRecord, UnreadableRecord
from mrtr_worker.tasks.store import CapReached, TaskStore, now_ms
from mrtr_worker.tasks.wire import Status
from mrtr_worker.tool_api.capabilities import Need, allows

logger = logging.getLogger(__name__)

TASK_ID = re.compile(r"[A-Za-z0-9_-]{20,64}")
"""What a task id looks like (`secrets.token_urlsafe(24)`); anything else is unknown without asking Redis."""


class _NotYours(Exception):
    pass


class _UnknownJob(Exception):
    """The task's job is not in this worker's catalog (its pack is not installed here)."""


class TaskService:
    def __init__(self, store: TaskStore, *, ttl_ms: int, poll_ms: int, max_live: int, jobs: JobLookup) -> None:
        self.store = store
        self._jobs = jobs
        self._ttl_ms, self._poll_ms, self._max_live = ttl_ms, poll_ms, max_live

    @asynccontextmanager
    async def _guard(self, task_id: str = "") -> AsyncIterator[None]:
        try:
            yield
        except NotReplicated as exc:
            logger.warning("task write not confirmed by replicas: %s", exc)
            raise errors.store_unconfirmed() from None
        except RedisError as exc:
            logger.warning("task store unavailable: %s", exc)
            raise errors.store_unavailable() from None
        except UnreadableRecord as exc:
            logger.error("task %s unreadable: %s", task_id, exc)
            raise errors.unreadable_task(task_id, str(exc)) from None

    async def create(self, ctx: ServerRequestContext[Any, Any], job: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Store a new working task and return its `CreateTaskResult` (only once Redis has it)."""
        known = self._jobs(job)
        if known is None:
            raise errors.unknown_job(job)
        now = now_ms()
        record = TaskRecord(
            task_id=secrets.token_urlsafe(24),
            principal=principal_of(ctx),
            job=job,
            state=known.initial(arguments),
            status=Status.WORKING,
            created_ms=now,
            updated_ms=now,
            ttl_ms=self._ttl_ms,
            poll_ms=self._poll_ms,
            can_ask=allows(ctx.session.client_capabilities, Need.FORM),
        )
        async with self._guard(record.task_id):
            try:
                await self.store.create(record, self._max_live)
            except CapReached:
                raise errors.task_limit(self._max_live, self._poll_ms) from None
        return record.create_result()

    async def _owned(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> TaskRecord:
        if not TASK_ID.fullmatch(task_id):
            raise errors.task_not_found(task_id)
        async with self._guard(task_id):
            stored = await self.store.load(task_id)
        if stored is None or stored.record.principal != principal_of(ctx):
            raise errors.task_not_found(task_id)
        return stored.record

    async def read_owned(self, principal: str | None, task_id: str) -> TaskRecord | None:
        """The task if it exists, is readable and belongs to `principal`; None for all else alike (no leak).

        For the listen stream (`tasks.push`), which reads again at every change; a Redis error raises.
        """
        if not TASK_ID.fullmatch(task_id):
            return None
        try:
            stored = await self.store.load(task_id)
        except UnreadableRecord:
            return None  # a poll then reports it clearly
        if stored is None or stored.record.principal != principal:
            return None
        return stored.record

    async def get(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> dict[str, Any]:
        return (await self._owned(ctx, task_id)).detailed()

    async def update(self, ctx: ServerRequestContext[Any, Any], task_id: str, answers: dict[str, Any]) -> None:
        """Fold the answers to outstanding questions; answers to anything else are ignored (the ack is the same)."""
        principal = (await self._owned(ctx, task_id)).principal

        def change(record: TaskRecord) -> tuple[TaskRecord, bool] | None:
            if record.principal != principal:
                raise _NotYours
            if record.status is not Status.INPUT_REQUIRED:
                return None
            job = self._jobs(record.job)
            if job is None:
                raise _UnknownJob(record.job)
            state, outstanding = record.state, dict(record.input_requests)
            for key, answer in answers.items():
                if key not in outstanding:
                    continue
                folded = job.answer(state, record.question_keys[key], answer)
                if folded is None:
                    continue  # unusable: the question stays outstanding under the same key
                state = folded
                del outstanding[key]
            if len(outstanding) == len(record.input_requests):
                return None
            now = now_ms()
            if outstanding:
                keys = {key: record.question_keys[key] for key in outstanding}
                return record.moved(
                    Status.INPUT_REQUIRED, now, state=state, input_requests=outstanding, question_keys=keys
                ), False
            return record.moved(Status.WORKING, now, state=state, input_requests={}, question_keys={}), True

        await self._mutate(task_id, change)

    async def cancel(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
        """Settle the task as cancelled (idempotent: a terminal task is left as it is)."""
        principal = (await self._owned(ctx, task_id)).principal

        def change(record: TaskRecord) -> tuple[TaskRecord, bool] | None:
            if record.principal != principal:
                raise _NotYours
            if record.terminal:
                return None
            cancelled = record.moved(Status.CANCELLED, now_ms(), status_message="cancelled by the client")
            return replace(cancelled, input_requests={}, question_keys={}), False

        await self._mutate(task_id, change)

    async def _mutate(self, task_id: str, change: Any) -> None:
        try:
            async with self._guard(task_id):
                stored = await self.store.mutate(task_id, change)
        except _NotYours:
            raise errors.task_not_found(task_id) from None
        except _UnknownJob as exc:
            detail = f"its job {exc.args[0]!r} is unknown here; another instance may know it"
            raise errors.unreadable_task(task_id, detail) from None
        if stored is None:
            raise errors.task_not_found(task_id)
