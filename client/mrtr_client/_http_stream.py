"""The runners' side of `_stream`: event streams over httpx, sync and async, each closed when its loop ends.

A loop may leave a stream open when it ends by an exception (an interrupt,
a failed task); the runner's `close_all` in a `finally` makes sure no socket
outlives the call that opened it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from mrtr_client._loop import Failure, Reply
from mrtr_client._stream import (
    EventLines,
    KeepAlive,
    Message,
    Opened,
    OpenStream,
    ReadStream,
    StreamEnded,
    StreamEvent,
)
from mrtr_protocol.events import EVENT_STREAM


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _event(parsed: dict[str, Any] | bool, started: float) -> StreamEvent:
    if isinstance(parsed, dict):
        return Message(parsed, _ms_since(started))
    return KeepAlive(_ms_since(started))


@dataclass
class _SyncHandle:
    response: httpx.Response
    lines: Iterator[str]
    parser: EventLines = field(default_factory=EventLines)


@dataclass
class _AsyncHandle:
    response: httpx.Response
    lines: AsyncIterator[str]
    parser: EventLines = field(default_factory=EventLines)


def _is_stream(response: httpx.Response) -> bool:
    return response.status_code == 200 and EVENT_STREAM in response.headers.get("content-type", "")


class SyncStreams:
    def __init__(self, http: httpx.Client, url: str) -> None:
        self._http, self._url = http, url
        self._open: list[_SyncHandle] = []

    def open(self, step: OpenStream) -> Opened | Reply | Failure:
        started = time.perf_counter()
        request = self._http.build_request("POST", self._url, content=step.body, headers=step.headers)
        try:
            response = self._http.send(request, stream=True)
            if not _is_stream(response):
                body = response.read()
                response.close()
                return Reply(response.status_code, response.headers, body, _ms_since(started))
        except httpx.TransportError as exc:
            return Failure(f"{type(exc).__name__}: {exc}", _ms_since(started))
        handle = _SyncHandle(response, response.iter_lines())
        self._open.append(handle)
        return Opened(handle, response.headers, _ms_since(started))

    def read(self, step: ReadStream) -> StreamEvent:
        handle = step.stream
        assert isinstance(handle, _SyncHandle)
        started = time.perf_counter()
        try:
            for line in handle.lines:
                parsed = handle.parser.feed(line)
                if parsed is not None:
                    return _event(parsed, started)
        except (httpx.TransportError, httpx.StreamError) as exc:
            return StreamEnded(f"{type(exc).__name__}: {exc}", _ms_since(started))
        return StreamEnded(None, _ms_since(started))

    def close(self, stream: object) -> None:
        if isinstance(stream, _SyncHandle) and stream in self._open:
            self._open.remove(stream)
            stream.response.close()

    def close_all(self) -> None:
        for handle in list(self._open):
            self.close(handle)


class AsyncStreams:
    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self._http, self._url = http, url
        self._open: list[_AsyncHandle] = []

    async def open(self, step: OpenStream) -> Opened | Reply | Failure:
        started = time.perf_counter()
        request = self._http.build_request("POST", self._url, content=step.body, headers=step.headers)
        try:
            response = await self._http.send(request, stream=True)
            if not _is_stream(response):
                body = await response.aread()
                await response.aclose()
                return Reply(response.status_code, response.headers, body, _ms_since(started))
        except httpx.TransportError as exc:
            return Failure(f"{type(exc).__name__}: {exc}", _ms_since(started))
        handle = _AsyncHandle(response, response.aiter_lines())
        self._open.append(handle)
        return Opened(handle, response.headers, _ms_since(started))

    async def read(self, step: ReadStream) -> StreamEvent:
        handle = step.stream
        assert isinstance(handle, _AsyncHandle)
        started = time.perf_counter()
        try:
            async for line in handle.lines:
                parsed = handle.parser.feed(line)
                if parsed is not None:
                    return _event(parsed, started)
        except (httpx.TransportError, httpx.StreamError) as exc:
            return StreamEnded(f"{type(exc).__name__}: {exc}", _ms_since(started))
        return StreamEnded(None, _ms_since(started))

    async def close(self, stream: object) -> None:
        if isinstance(stream, _AsyncHandle) and stream in self._open:
            self._open.remove(stream)
            await stream.response.aclose()

    async def close_all(self) -> None:
        for handle in list(self._open):
            await self.close(handle)
