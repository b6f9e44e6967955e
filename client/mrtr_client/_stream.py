"""A long-lived event stream as loop steps, free of I/O: open it, read its next message, close it.

The push of task changes (`_push`) reads a `subscriptions/listen` stream one
message at a time between other steps (an answer to a question, a cancel),
so the stream is a handle the runner keeps open, and each read is a step the
loop yields like `Send`. `EventLines` turns the stream's lines into messages
and keep-alives; the runners (`client.py`) own the sockets and close every
stream a loop left open when it ends.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class OpenStream:
    """POST a request whose answer is an event stream; the runner answers `Opened`, or a `Reply`/`Failure`."""

    request_id: int
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class Opened:
    stream: object
    """The runner's handle; only passed back in `ReadStream` and `CloseStream`."""
    headers: Mapping[str, str]
    elapsed_ms: float


@dataclass(frozen=True)
class ReadStream:
    """The stream's next message or keep-alive; the runner answers `Message`, `KeepAlive` or `StreamEnded`."""

    stream: object


@dataclass(frozen=True)
class CloseStream:
    stream: object


@dataclass(frozen=True)
class Message:
    message: dict[str, Any]
    elapsed_ms: float


@dataclass(frozen=True)
class KeepAlive:
    """A comment line (the server's ping): nothing happened, but time passed."""

    elapsed_ms: float


@dataclass(frozen=True)
class StreamEnded:
    problem: str | None
    """None for a clean end of the body; else what broke it."""
    elapsed_ms: float


StreamStep = OpenStream | ReadStream | CloseStream
StreamEvent = Message | KeepAlive | StreamEnded


@dataclass
class EventLines:
    """Server-sent events read line by line: `feed` returns a message at the end of an event, or a keep-alive."""

    _data: list[str] = field(default_factory=list)

    def feed(self, line: str) -> dict[str, Any] | bool | None:
        """A complete event's JSON object; True for a comment (keep-alive); None while an event is incomplete."""
        if line.startswith(":"):
            return True
        if line == "data" or line.startswith("data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(" ") else value)
            return None
        if line or not self._data:
            return None  # another field (event:, id:, retry:), or a blank line with no event
        text, self._data = "\n".join(self._data), []
        try:
            parsed = json.loads(text)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
