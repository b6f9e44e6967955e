"""The tasks extension's optional push: `notifications/tasks` on a `subscriptions/listen` stream.

A listen whose `params.notifications` names `taskIds` (with the extension
declared, -32021 otherwise) is served here; any other listen goes on to the
SDK's own `ListenHandler`. The stream follows the SDK's listen contract: the
acknowledgement first (its `notifications.taskIds` are the honoured ids:
the caller's own tasks; unknown, expired and other principals' ids are left
out alike, so the ack reveals nothing a `tasks/get` would not), every frame
stamped with the subscription id, and a graceful end with the completion
result (`SubscriptionsListenResult`).

What the stream carries: each honoured task's current `DetailedTask` at once
(a change made before the listen is never missed), then the task again each
time its record changes in Redis (any worker's write, heard through
`TaskChanges`; a re-read after every change, never a poll over keys). A
write that changes nothing but `lastUpdatedAt` is not sent. The stream ends
gracefully when every watched task is terminal (or gone), when this worker
drains (clients listen again through the proxy and land elsewhere), and when
Redis fails mid-stream; the client then re-listens or polls.

Only task ids are honoured on such a stream: a listen that names `taskIds`
and core kinds (`toolsListChanged`...) gets those left out of its ack; they
take a listen of their own (the fleet's lists never change anyway).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    Notification,
    NotificationParams,
    ServerNotification,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenResult,
)
from pydantic import ConfigDict
from redis.exceptions import RedisError

from mrtr_protocol.tasks import (
    LISTEN_TASK_IDS,
    SUBSCRIPTION_ID_META_KEY,
    SUBSCRIPTIONS_LISTEN,
    TASKS_NOTIFICATION,
)
from mrtr_worker.lifecycle import Lifecycle
from mrtr_worker.tasks import errors
from mrtr_worker.tasks.changes import TaskChanges
from mrtr_worker.tasks.principal import principal_of
from mrtr_worker.tasks.record import TaskRecord
from mrtr_worker.tasks.service import TaskService
from mrtr_worker.tasks.wire import EXTENSION_ID

logger = logging.getLogger(__name__)

MAX_TASK_IDS = 64
"""Tasks one listen may watch; more is -32602 (a client follows one task, or a handful)."""
MAX_STREAMS = 1024
"""Task listens open at once on one worker (the SDK's own listen cap); more get -32603 before the ack."""


class _TaskParams(NotificationParams):
    model_config = ConfigDict(extra="allow")
    """The `DetailedTask`'s fields ride as extras: the SDK types no `notifications/tasks`."""


class TaskNotification(Notification[_TaskParams, str]):
    method: str = TASKS_NOTIFICATION
    params: _TaskParams


class _Watch:
    """One stream's pending changes, coalesced: a burst of writes costs one re-read per task."""

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._changed: set[str] | None = set()
        self.closed = False

    def changed(self, task_id: str | None) -> None:
        if task_id is None:
            self._changed = None  # re-read everything
        elif self._changed is not None:
            self._changed.add(task_id)
        self._event.set()

    def close(self) -> None:
        self.closed = True
        self._event.set()

    async def next(self) -> set[str] | None:
        """The ids changed since the last call (None: all of them), once there is any change or a close."""
        await self._event.wait()
        self._event = anyio.Event()
        changed, self._changed = self._changed, set()
        return changed


def requested_task_ids(params: Mapping[str, Any] | None) -> list[str] | None:
    """The ids a listen's `notifications.taskIds` names (in order, once each), or None when it names none."""
    notifications = (params or {}).get("notifications")
    if not isinstance(notifications, Mapping) or LISTEN_TASK_IDS not in notifications:
        return None
    ids = notifications[LISTEN_TASK_IDS]
    if not isinstance(ids, list) or not all(isinstance(task_id, str) for task_id in ids):
        raise MCPError(INVALID_PARAMS, f"notifications.{LISTEN_TASK_IDS} must be an array of task ids")
    unique = list(dict.fromkeys(ids))
    if len(unique) > MAX_TASK_IDS:
        raise MCPError(INVALID_PARAMS, f"a listen watches at most {MAX_TASK_IDS} tasks; got {len(unique)}")
    return unique


def _view(record: TaskRecord) -> dict[str, Any]:
    """What a subscriber is told; `lastUpdatedAt` alone changing is not news."""
    wire = record.detailed()
    wire.pop("lastUpdatedAt", None)
    return wire


class TaskPush:
    """SDK middleware serving task listens; also the worker's switch to end them all (drain)."""

    def __init__(self, service: TaskService, lifecycle: Lifecycle) -> None:
        self._service = service
        self._lifecycle = lifecycle
        self.changes = TaskChanges(service.store.client, service.store.changes)
        self._watches: set[_Watch] = set()

    @property
    def streams(self) -> int:
        """Task listen streams open on this worker."""
        return len(self._watches)

    def start(self) -> None:
        self.changes.start()

    async def stop(self) -> None:
        self.close()
        await self.changes.stop()

    def close(self) -> None:
        """End every task listen gracefully (each sends its completion result); on drain."""
        for watch in list(self._watches):
            watch.close()

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != SUBSCRIPTIONS_LISTEN or ctx.request_id is None:
            return await call_next(ctx)
        task_ids = requested_task_ids(ctx.params)
        if task_ids is None:
            return await call_next(ctx)
        require_client_extension(ctx, EXTENSION_ID)
        if len(self._watches) >= MAX_STREAMS:
            raise MCPError(INTERNAL_ERROR, "Subscription limit reached on this worker; poll tasks/get or listen again")
        return await self._serve(ctx, task_ids)

    async def _serve(self, ctx: ServerRequestContext[Any, Any], task_ids: list[str]) -> SubscriptionsListenResult:
        principal = principal_of(ctx)
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        watch = _Watch()
        unsubscribe = self.changes.subscribe(frozenset(task_ids), watch.changed)  # before reading: no gap
        self._watches.add(watch)
        try:
            try:
                found = [(task_id, await self._service.read_owned(principal, task_id)) for task_id in task_ids]
            except RedisError as exc:
                logger.warning("task listen: store unavailable: %s", exc)
                raise errors.store_unavailable() from None
            current = {task_id: record for task_id, record in found if record is not None}
            await self._acknowledge(ctx, list(current), meta)
            sent: dict[str, dict[str, Any]] = {}
            for record in current.values():
                await self._push(ctx, record, meta, sent)
            live = {task_id for task_id, record in current.items() if not record.terminal}
            await self._follow(ctx, principal, live, watch, meta, sent)
        finally:
            unsubscribe()
            self._watches.discard(watch)
        return SubscriptionsListenResult(_meta=meta)

    async def _follow(
        self,
        ctx: ServerRequestContext[Any, Any],
        principal: str | None,
        live: set[str],
        watch: _Watch,
        meta: dict[str, Any],
        sent: dict[str, dict[str, Any]],
    ) -> None:
        """Push each change until no watched task can change any more, or the stream is closed."""
        while live and not watch.closed and not self._lifecycle.draining:
            changed = await watch.next()
            if watch.closed:
                return
            for task_id in sorted(live if changed is None else changed & live):
                try:
                    record = await self._service.read_owned(principal, task_id)
                except RedisError as exc:
                    logger.warning("task listen: store unavailable mid-stream (%s); ending it", exc)
                    return
                if record is None or record.terminal:
                    live.discard(task_id)  # gone (expired) or final: nothing more will come
                if record is not None:
                    await self._push(ctx, record, meta, sent)

    @staticmethod
    async def _acknowledge(ctx: ServerRequestContext[Any, Any], honoured: list[str], meta: dict[str, Any]) -> None:
        notifications = SubscriptionFilter.model_validate({LISTEN_TASK_IDS: honoured})
        ack = SubscriptionsAcknowledgedNotification(
            params=SubscriptionsAcknowledgedNotificationParams(notifications=notifications, _meta=meta)
        )
        await ctx.session.send_notification(ack, related_request_id=ctx.request_id)

    @staticmethod
    async def _push(
        ctx: ServerRequestContext[Any, Any],
        record: TaskRecord,
        meta: dict[str, Any],
        sent: dict[str, dict[str, Any]],
    ) -> None:
        view = _view(record)
        if sent.get(record.task_id) == view:
            return
        sent[record.task_id] = view
        params = _TaskParams.model_validate({**record.detailed(), "_meta": meta})
        notification = TaskNotification(params=params)
        await ctx.session.send_notification(cast(ServerNotification, notification), related_request_id=ctx.request_id)
