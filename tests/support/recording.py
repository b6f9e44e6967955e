"""Every JSON-RPC message a server sends, recorded under the method of the request it answers.

`RecordingTransport` sits under an `httpx.Client` (the MRTR client's, or a raw one) and notes each
message of each reply as the caller reads it: a JSON body once read, and every event of an event
stream as it arrives (a listen's acknowledgement, its pushes and its completion; a call's progress
notifications and final response). Bodies that are not JSON-RPC (a 401's OAuth error, an empty 202)
are not MCP messages and are left out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx

from mrtr_protocol import events

Message = dict[str, object]


@dataclass(frozen=True)
class Recorded:
    method: str
    """The method of the request this message answers (or streamed on)."""
    target: str | None
    """What the request named: a tool's or prompt's `name`, a resource's `uri`, a task's `taskId`."""
    http_status: int
    message: Message


class _Tee(httpx.SyncByteStream):
    """Passes a reply's bytes on as they are read, and hands each complete message to `note`."""

    def __init__(self, inner: httpx.SyncByteStream, content_type: str, note: Callable[[Message], None]) -> None:
        self._inner, self._content_type, self._note = inner, content_type, note
        self._body = b""
        self._seen = 0
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            self._body += chunk
            if events.EVENT_STREAM in self._content_type:
                self._emit(final=False)
            yield chunk

    def close(self) -> None:
        self._inner.close()
        if not self._closed:
            self._closed = True
            self._emit(final=True)

    def _emit(self, *, final: bool) -> None:
        if events.EVENT_STREAM not in self._content_type:
            if final and self._body:
                try:
                    found = events.messages(self._content_type, self._body)
                except ValueError:
                    return
                for message in found:
                    self._note(message)
            return
        text = self._body.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
        if not final:
            text = text[: text.rfind("\n\n") + 2] if "\n\n" in text else ""
        datas = events.event_data(text)
        for data in datas[self._seen :]:
            try:
                parsed = json.loads(data)
            except ValueError:
                continue
            if isinstance(parsed, dict):
                self._note(parsed)
        self._seen = max(self._seen, len(datas))


class RecordingTransport(httpx.BaseTransport):
    def __init__(self, inner: httpx.BaseTransport | None = None) -> None:
        self.inner = inner or httpx.HTTPTransport()
        self.recorded: list[Recorded] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        method, target = _request_parts(request)
        response = self.inner.handle_request(request)
        content_type = response.headers.get("content-type", "")
        if method is None or not ("json" in content_type or events.EVENT_STREAM in content_type):
            return response
        status = response.status_code

        def note(message: Message) -> None:
            if "jsonrpc" in message:
                self.recorded.append(Recorded(method, target, status, message))

        assert isinstance(response.stream, httpx.SyncByteStream)
        tee = _Tee(response.stream, content_type, note)
        return httpx.Response(status, headers=response.headers, stream=tee, extensions=response.extensions)

    def close(self) -> None:
        self.inner.close()


def _request_parts(request: httpx.Request) -> tuple[str | None, str | None]:
    """The request's method and what it names, from its body (or its headers, when the body is unreadable)."""
    try:
        body = json.loads(request.content)
    except ValueError:
        body = None
    method = body.get("method") if isinstance(body, dict) else None
    params = body.get("params") if isinstance(body, dict) else None
    target = None
    if isinstance(params, dict):
        target = next((params[key] for key in ("name", "uri", "taskId") if isinstance(params.get(key), str)), None)
    if not isinstance(method, str):
        return request.headers.get("Mcp-Method"), request.headers.get("Mcp-Name")
    return method, target
