"""Following a task by push: a `subscriptions/listen` naming it, free of I/O, beside the polling in `_tasks`.

A refused listen, a dropped stream or one ended early (its worker drains) falls back to a poll and a new
listen, then to polling: the final result is never lost, only its delivery changes. The rules:
`docs/client.md`, "Tasks".
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any, Protocol

from mrtr_client import _results, _wire
from mrtr_client._loop import AUTH_STATUSES, Failure, Reply, Step
from mrtr_client._stream import CloseStream, KeepAlive, Message, Opened, OpenStream, ReadStream
from mrtr_client.errors import ProtocolViolation
from mrtr_client.trace import TaskExchange, TaskSnapshot
from mrtr_protocol.instance import WORKER_ID_HEADER, WORKER_VERSION_HEADER
from mrtr_protocol.rounds import RETRYABLE_STATUSES
from mrtr_protocol.tasks import (
    LISTEN_TASK_IDS,
    SUBSCRIPTIONS_ACKNOWLEDGED,
    SUBSCRIPTIONS_LISTEN,
    TASK_ID_PARAM,
    TASKS_NOTIFICATION,
)
from mrtr_protocol.wire import encode_request, request_headers, request_meta

_WORKER_ID, _WORKER_VERSION = WORKER_ID_HEADER.lower(), WORKER_VERSION_HEADER.lower()


class Follower(Protocol):
    """What the feed needs of the task's follower (`_tasks`): whom to ask, with what, and where to record it."""

    task_id: str
    declared: Mapping[str, Any]
    ids: Iterator[int]
    headers: Mapping[str, str] | None
    waited: float

    def out_of_time(self) -> bool: ...

    def note(self, exchange: TaskExchange) -> Generator[Step, Any, None]: ...

    def exchange_record(
        self, method: str, reply: Reply, snapshot: TaskSnapshot | None, detail: str | None = None
    ) -> TaskExchange: ...


class PushFeed:
    """One task's push: at most one listen open at a time, re-opened after a drop, given up when refused."""

    def __init__(self, max_relistens: int, read: Callable[[Mapping[str, Any], str | None], TaskSnapshot]) -> None:
        self._max_relistens = max_relistens
        self._read = read
        """The strict reader of a `DetailedTask` (`_tasks.snapshot_from`): a push is read like a poll."""
        self._stream: object | None = None
        self._listen_id: int | None = None
        self._headers: Mapping[str, str] = {}
        self._ends = 0
        self.off = False
        """Push refused or given up: the task is polled from now on."""

    def next_snapshot(self, f: Follower) -> Generator[Step, Any, TaskSnapshot | None]:
        """The task's next pushed state, or None when there is none to wait for (the caller polls once)."""
        if self.off:
            return None
        if self._stream is None and not (yield from self._open(f)):
            return None
        while self._stream is not None:
            event = yield ReadStream(self._stream)
            f.waited += event.elapsed_ms / 1000
            if isinstance(event, Message):
                _wire.refuse_server_request(event.message, "a listen stream")
                snapshot = self._snapshot(f, event.message)
                if snapshot is not None:
                    yield from f.note(self._record(f, TASKS_NOTIFICATION, snapshot, "push"))
                    return snapshot
                if self._is_end(event.message):
                    _check_completion(event.message)
                    yield from self._ended(f, "the server ended the stream")
                    return None
            elif isinstance(event, KeepAlive):
                if f.out_of_time():
                    return None
            else:
                yield from self._ended(f, event.problem or "the stream closed")
                return None
        return None

    def close(self) -> Generator[Step, Any, None]:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            yield CloseStream(stream)

    def _open(self, f: Follower) -> Generator[Step, Any, bool]:
        """Listen, and read the acknowledgement: True when the task is being pushed."""
        request_id = next(f.ids)
        params = {"notifications": {LISTEN_TASK_IDS: [f.task_id]}, "_meta": request_meta(f.declared, _wire.CLIENT_INFO)}
        body = encode_request(request_id, SUBSCRIPTIONS_LISTEN, params)
        outcome = yield OpenStream(request_id, body, request_headers(SUBSCRIPTIONS_LISTEN, params, f.headers))
        f.waited += outcome.elapsed_ms / 1000
        if isinstance(outcome, Failure):
            yield from self._ended(f, outcome.problem)
            return False
        if isinstance(outcome, Reply):
            yield from self._refused(f, outcome, request_id)
            return False
        assert isinstance(outcome, Opened)
        self._stream, self._listen_id, self._headers = outcome.stream, request_id, outcome.headers
        first = yield ReadStream(outcome.stream)
        f.waited += first.elapsed_ms / 1000
        while isinstance(first, KeepAlive) and not f.out_of_time():  # a comment is no message: wait for the ack
            first = yield ReadStream(outcome.stream)
            f.waited += first.elapsed_ms / 1000
        if not isinstance(first, Message):
            yield from self._ended(f, "the stream ended before its acknowledgement")
            return False
        honoured = _honoured(first.message)
        if f.task_id not in honoured:
            yield from self.close()
            self.off = True
            refused = "push refused: the task was not acknowledged"
            yield from f.note(self._record(f, SUBSCRIPTIONS_LISTEN, None, refused))
            return False
        yield from f.note(self._record(f, SUBSCRIPTIONS_LISTEN, None, "listening"))
        return True

    def _refused(self, f: Follower, reply: Reply, request_id: int) -> Generator[Step, Any, None]:
        """A listen answered without a stream: a proxy's retryable status is a drop, anything else a refusal."""
        if reply.status in RETRYABLE_STATUSES:
            yield from self._ended(f, f"HTTP {reply.status}")
            return
        self.off = True
        detail = f"HTTP {reply.status}" if reply.status in AUTH_STATUSES else _error_text(reply, request_id)
        yield from f.note(f.exchange_record(SUBSCRIPTIONS_LISTEN, reply, None, f"push refused: {detail}"))

    def _ended(self, f: Follower, why: str) -> Generator[Step, Any, None]:
        yield from self.close()
        self._ends += 1
        if self._ends > self._max_relistens:
            self.off = True
        then = "polling from now on" if self.off else "polling once, then listening again"
        yield from f.note(self._record(f, SUBSCRIPTIONS_LISTEN, None, f"push ended ({why}); {then}"))

    def _snapshot(self, f: Follower, message: Mapping[str, Any]) -> TaskSnapshot | None:
        if message.get("method") != TASKS_NOTIFICATION:
            return None
        params = message.get("params")
        if not isinstance(params, dict) or params.get(TASK_ID_PARAM) != f.task_id:
            return None
        return self._read(params, self._headers.get(_WORKER_ID))

    def _is_end(self, message: Mapping[str, Any]) -> bool:
        return message.get("id") == self._listen_id and ("result" in message or "error" in message)

    def _record(self, f: Follower, method: str, snapshot: TaskSnapshot | None, detail: str) -> TaskExchange:
        headers = self._headers
        return TaskExchange(
            method,
            f.task_id,
            headers.get(_WORKER_ID),
            headers.get(_WORKER_VERSION),
            200,
            0.0,
            f.waited,
            snapshot,
            detail,
        )


def _honoured(message: Mapping[str, Any]) -> list[str]:
    """The task ids an acknowledgement honours; a stream that does not begin with one breaks the wire.

    The acknowledgement MUST be the stream's first message and carries `params.notifications`, the subset
    of what was asked that the server honours (no `taskIds`: none of the tasks).
    """
    if message.get("method") != SUBSCRIPTIONS_ACKNOWLEDGED:
        first = message.get("method") or ("a response" if "id" in message else "a message without a method")
        raise ProtocolViolation(f"listen stream began with {first}, not {SUBSCRIPTIONS_ACKNOWLEDGED}")
    params = message.get("params")
    notifications = params.get("notifications") if isinstance(params, dict) else None
    if not isinstance(notifications, dict):
        raise ProtocolViolation(f"{SUBSCRIPTIONS_ACKNOWLEDGED} without a params.notifications object")
    ids = notifications.get(LISTEN_TASK_IDS, [])
    if not isinstance(ids, list) or not all(isinstance(task_id, str) for task_id in ids):
        raise ProtocolViolation(f"{SUBSCRIPTIONS_ACKNOWLEDGED}: taskIds must be an array of strings ({ids!r:.80})")
    return ids


def _check_completion(message: Mapping[str, Any]) -> None:
    """The listen's own response: a result (`resultType`, like every result) or an error, as the wire has them."""
    if "result" in message:
        result = message["result"]
        if not isinstance(result, dict):
            raise ProtocolViolation(f"{SUBSCRIPTIONS_LISTEN} completion is not an object")
        _results.expect_complete(SUBSCRIPTIONS_LISTEN, result)
    else:
        _results.check_error(message.get("error"))


def _error_text(reply: Reply, request_id: int) -> str:
    content_type = reply.headers.get("content-type", "")
    try:
        message = _wire.parse_reply(content_type, reply.body, request_id)
    except ProtocolViolation as exc:
        return str(exc)
    error = message.get("error")
    if isinstance(error, dict):
        return f"{error.get('code')} {error.get('message', '')}".strip()
    return f"HTTP {reply.status}, no stream"
