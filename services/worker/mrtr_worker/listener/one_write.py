"""uvicorn's httptools protocol, with a response's head and the body that follows it in one write.

uvicorn writes the status line and headers when the app sends
`http.response.start` and the body when it sends `http.response.body`: two
`send` syscalls per response, and two reads on the other side (the proxy, or
a client) for what is usually one small JSON answer. The write cannot be
joined above the transport (uvicorn writes once per ASGI message), so the
protocol here hands uvicorn a transport that holds a response head back
until the next write, which then goes out with it, or until the end of the
current event-loop turn, whichever comes first. A JSON answer sent in one go
(start and body in the same turn, as Starlette's responses do) leaves in one
write with the same bytes; a stream's head goes out at the end of its turn at
the latest, and every later write (each server-sent event) passes straight
through, so nothing waits for more data. Closing or aborting sends what is
held first, so `Connection: close` and keep-alive behave as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mrtr_worker.listener.uvicorn_internals import HttpToolsProtocol

_HEAD_START = b"HTTP/"
"""How every status line uvicorn writes begins (responses, `100 Continue`, its own 400s and 500s)."""


class HeadHoldingTransport(asyncio.Transport):
    """A transport that delays a response head to join it with the next write; everything else is delegated."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + bytes(data))
        elif bytes(data[: len(_HEAD_START)]) == _HEAD_START:
            self._held = bytes(data)
            self._loop.call_soon(self._flush)
        else:
            self._transport.write(data)

    def _flush(self) -> None:
        """Send a held head: nothing followed it in the turn it was written (a stream, or a slow body)."""
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def writelines(self, list_of_data: Any) -> None:
        self._flush()
        self._transport.writelines(list_of_data)

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._flush()
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()


class OneWriteProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol on a `HeadHoldingTransport` (pass as `uvicorn.Config(http=...)`)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's
        super().connection_made(HeadHoldingTransport(transport, self.loop))
