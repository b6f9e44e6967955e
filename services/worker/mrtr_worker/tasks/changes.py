"""Task changes from Redis: one pub/sub subscription per worker, fanned out to its listen streams.

Every write of a task record publishes the task's id on the store's
`task-changes` channel in the same transaction (`TaskStore`), whichever
worker made the write; this worker's listen streams (`tasks.push`) hear of it
here. It is the SDK's `SubscriptionBus` seam ("a custom bus backed by Redis
pub/sub for multi-replica deployments") for an event the SDK's closed event
vocabulary cannot carry: a task id.

Pub/sub is fire-and-forget: a change published while this worker's
subscription was down is lost. So every (re)subscription, including redis-py
reconnecting on its own, tells every listener to re-read all its tasks
(`None` instead of an id): a listener may see a state twice, never miss the last one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import redis.asyncio as redis
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

Listener = Callable[[str | None], None]
"""Called on the event loop with a changed task's id, or None: re-read every task you watch. Must not raise."""

_BACKOFF_SECONDS = 0.5
_READ_SECONDS = 1.0


class TaskChanges:
    def __init__(self, client: redis.Redis, channel: str) -> None:
        self._client = client
        self._channel = channel
        self._listeners: dict[object, tuple[frozenset[str], Listener]] = {}
        self._runner: asyncio.Task[None] | None = None
        self.subscribed = False
        """Whether the subscription is up (changes are arriving); for tests and health."""

    def subscribe(self, task_ids: frozenset[str], listener: Listener) -> Callable[[], None]:
        """Hear of changes to `task_ids`; returns an idempotent unsubscribe."""
        token = object()
        self._listeners[token] = (task_ids, listener)
        return lambda: self._listeners.pop(token, None) and None

    def start(self) -> None:
        if self._runner is None:
            self._runner = asyncio.create_task(self._run(), name="task-changes")

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner

    async def _run(self) -> None:
        """Subscribe and dispatch for ever; on trouble, start over after a short pause (and re-sync everyone)."""
        while True:
            pubsub = self._client.pubsub()
            try:
                await pubsub.subscribe(self._channel)
                while True:
                    message = await pubsub.get_message(timeout=_READ_SECONDS)
                    if message is not None:
                        self._dispatch(message)
            except (RedisError, OSError) as exc:
                if self.subscribed:
                    logger.warning("task changes: subscription lost (%s); resubscribing", exc)
                self.subscribed = False
            finally:
                with contextlib.suppress(RedisError, OSError):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
            await asyncio.sleep(_BACKOFF_SECONDS)

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "subscribe":
            self.subscribed = True
            self._fan_out(None)
        elif kind == "message":
            data = message.get("data")
            if isinstance(data, str):
                self._fan_out(data)

    def _fan_out(self, task_id: str | None) -> None:
        for task_ids, listener in list(self._listeners.values()):
            if task_id is None or task_id in task_ids:
                try:
                    listener(task_id)
                except Exception:  # fan-out boundary: one bad listener must not starve the others
                    logger.exception("task change listener raised; continuing")
