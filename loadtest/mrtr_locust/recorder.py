"""What a call did, even when it failed: every HTTP exchange and every question, recorded on the side.

A complete call's `CallResult.trace` is the authority. A call that raised has
no trace, so each user's client runs over a transport that notes every
exchange (where it landed, its status, and why the round ended, read from the
reply the way the client reads it) and an input handler that notes every
question answered.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from mrtr_client import ScriptedInputs, TaskExchange
from mrtr_protocol import events
from mrtr_protocol.instance import WORKER_ID_HEADER, WORKER_VERSION_HEADER
from mrtr_protocol.rounds import ERROR, RETRYABLE_STATUSES, TRANSPORT, end_reason
from mrtr_protocol.tasks import SUBSCRIPTIONS_LISTEN

LISTEN = "listen"
"""The reason noted for a `subscriptions/listen` exchange: a stream the client reads as it goes, not a round."""


@dataclass(frozen=True)
class HopRecord:
    instance: str | None
    version: str | None
    reason: str
    ms: float
    status: int | None

    def as_json(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "version": self.version,
            "reason": self.reason,
            "ms": round(self.ms, 3),
            "status": self.status,
        }


class RecordingTransport(httpx.BaseTransport):
    """Passes every request to `inner` and notes the exchange in `hops`."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.hops: list[HopRecord] = []
        self.received_bytes = 0
        """Response body bytes over every exchange since the last `clear` (rounds, task polls, answers)."""

    def clear(self) -> None:
        self.hops.clear()
        self.received_bytes = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        started = time.perf_counter()
        if request.headers.get("mcp-method") == SUBSCRIPTIONS_LISTEN:
            return self._pass_stream(request, started)
        try:
            response = self.inner.handle_request(request)
            response.read()
        except Exception:
            self.hops.append(HopRecord(None, None, TRANSPORT, _ms_since(started), None))
            raise
        self.received_bytes += len(response.content)
        self.hops.append(
            HopRecord(
                response.headers.get(WORKER_ID_HEADER),
                response.headers.get(WORKER_VERSION_HEADER),
                round_end_reason(response.status_code, response.headers.get("content-type", ""), response.content),
                _ms_since(started),
                response.status_code,
            )
        )
        return response

    def _pass_stream(self, request: httpx.Request, started: float) -> httpx.Response:
        """A listen's event stream is handed on unread (counted as it passes): reading it whole here would
        block until the server ends it, and a task waiting in input_required never ends it by itself."""
        try:
            response = self.inner.handle_request(request)
        except Exception:
            self.hops.append(HopRecord(None, None, TRANSPORT, _ms_since(started), None))
            raise
        instance, version = response.headers.get(WORKER_ID_HEADER), response.headers.get(WORKER_VERSION_HEADER)
        self.hops.append(HopRecord(instance, version, LISTEN, _ms_since(started), response.status_code))
        response.stream = _CountedStream(response.stream, self)
        return response

    def close(self) -> None:
        self.inner.close()


class _CountedStream(httpx.SyncByteStream):
    """A response body passed through as it arrives, its bytes added to the transport's count."""

    def __init__(self, inner: httpx.SyncByteStream | httpx.AsyncByteStream, counter: RecordingTransport) -> None:
        assert isinstance(inner, httpx.SyncByteStream)
        self._inner, self._counter = inner, counter

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            self._counter.received_bytes += len(chunk)
            yield chunk

    def close(self) -> None:
        self._inner.close()


def round_end_reason(status: int, content_type: str, body: bytes) -> str:
    """Why a round ended, as the client's trace names it: input, admission, ..., complete, error, transport.

    The reply is read by `mrtr_protocol.events` (JSON or server-sent events, the last response wins) and the
    reason by `mrtr_protocol.rounds.end_reason`, as the client reads them.
    """
    if status in RETRYABLE_STATUSES:
        return TRANSPORT
    try:
        message = events.response(content_type, body)
    except ValueError:
        return ERROR
    result = None if message is None or "error" in message else message.get("result")
    return end_reason(result) if isinstance(result, dict) else ERROR


@dataclass
class TaskWatch:
    """The `on_task` callback of a task call: the task's id and every status it was seen in, in order.

    Kept on the side, so a call that raised (a task `failed`, `cancelled` or never
    ended) still says which task it was and how far it got.
    """

    task_id: str | None = None
    changes: list[tuple[str, float]] = field(default_factory=list)
    """`(status, Unix time first seen)` for each change of status."""

    @property
    def statuses(self) -> list[str]:
        return [status for status, _ in self.changes]

    def __call__(self, exchange: TaskExchange) -> None:
        self.task_id = exchange.task_id or self.task_id
        status = exchange.status
        if status is not None and (not self.changes or self.changes[-1][0] != status):
            self.changes.append((status, time.time()))


@dataclass
class RecordingInputs(ScriptedInputs):
    """Scripted answers that also note each question's key, in the order asked."""

    asked: list[str] = field(default_factory=list)

    def answer(self, key: str, request: Mapping[str, Any]) -> dict[str, Any]:
        """A task asks under fresh keys (`refine-1`: the job's key and a number): answered as the job's key."""
        self.asked.append(key)
        return super().answer(key if key in self.forms else job_key(key), request)


def job_key(task_key: str) -> str:
    """The job's question key behind a task's (`refine-3` -> `refine`); any other key as is."""
    base, _, number = task_key.rpartition("-")
    return base if base and number.isdigit() else task_key


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000
