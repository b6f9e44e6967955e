"""The worker's own listener: bounded request heads, bodies and connections, and one answer per request.

uvicorn's httptools protocol (here with `one_write`'s single write per response) reads a head for as
long as a client takes and as large as it sends it, on as many connections as it opens; it never times
out a connection that sends nothing; and a request with `Upgrade` is answered, then leaves the parser in
its upgrade state, swallowing whatever follows. This protocol adds the usual bounds of the field, each
a setting (`RequestBounds`, from `MRTR_WORKER_*`):

* the head (request line and headers) is counted as it arrives, up to the blank line that ends it, and
  refused with 431 as soon as it passes `max_head_bytes` or `max_headers` fields: never buffered whole;
* the head must be complete within `head_timeout` of the connection's opening (its first request) or of
  its first byte (later ones: uvicorn's keep-alive timeout covers the wait before it), else 408; a new
  connection that sent nothing by then is simply closed;
* a body may pause at most `body_timeout` between two reads (not while the worker holds reading back:
  flow control, a pipelined request waiting its turn, a `100 Continue` not sent yet), else 408;
* past `max_connections` open connections, a new one is answered 503 (with `Retry-After`) and closed;
* `Upgrade` and `CONNECT` are answered 400 once and the connection closes.

Every refusal carries a JSON-RPC error body (`id: null`: the body is never read) and
`Connection: close`, and comes after the answers to any requests pipelined before it, so each
request gets exactly one answer, in order. Then the connection half-closes and drops what the client
still sends for at most `head_timeout` (nginx's lingering close), so a client that is still writing
reads the refusal instead of losing it to a reset.

Counting a head exactly needs to know where it ends among the bytes read: the protocol finds the blank
line itself (the parser agrees: it refuses bare LF line ends and folded header lines), feeds the parser
up to it, then feeds a body of known length exactly, so a request pipelined behind it is counted from its
first byte. A chunked body is fed in slices of `CHUNKED_SLICE` bytes; a request pipelined behind one is
counted from the start of the slice it began in, at most that many bytes too early. The usual read, one
whole request and nothing more, is fed in one call.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import httptools
from uvicorn import Config

from mrtr_protocol.busy import SERVER_BUSY
from mrtr_worker.listener.one_write import OneWriteProtocol
from mrtr_worker.listener.uvicorn_internals import STATUS_LINE, ServerState, unset_keepalive

logger = logging.getLogger(__name__)

END_OF_HEAD = b"\r\n\r\n"
_CR_LF = frozenset(b"\r\n")
CHUNKED_SLICE = 1024
"""Bytes of a chunked body fed to the parser at a time (a head pipelined behind it is counted from a slice's start)."""
INVALID_REQUEST = -32600


@dataclass(frozen=True)
class RequestBounds:
    """What one connection may make the worker hold, and for how long (the defaults are the settings')."""

    max_head_bytes: int = 32 * 1024
    max_headers: int = 100
    head_timeout: float = 10.0
    body_timeout: float = 60.0
    max_connections: int = 1024


class _Refused(Exception):
    """Raised from a parser callback once the request is refused: the parser stops at once."""


def bounded_protocol(bounds: RequestBounds) -> type[BoundedProtocol]:
    """The protocol class with these bounds, for `uvicorn.Config(http=...)` (uvicorn instantiates the class)."""
    return type("BoundedProtocol", (BoundedProtocol,), {"bounds": bounds})


def refusal(status: int, message: str, default_headers: list[tuple[bytes, bytes]], *, retry_after: int = 0) -> bytes:
    """A complete response that ends the connection: the status, a JSON-RPC error, `Connection: close`."""
    code = SERVER_BUSY if status >= 500 else INVALID_REQUEST
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()
    lines = [STATUS_LINE[status]]
    lines += [name + b": " + value + b"\r\n" for name, value in default_headers]
    lines.append(b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body))
    if retry_after:
        lines.append(b"retry-after: %d\r\n" % retry_after)
    lines.append(b"connection: close\r\n\r\n")
    return b"".join(lines) + body


class BoundedProtocol(OneWriteProtocol):
    """`OneWriteProtocol` with bounded heads, bodies and connections; see the module's notes."""

    bounds: ClassVar[RequestBounds] = RequestBounds()

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._reading_head = True
        """The next bytes belong to a request head (from the connection's start, and after each request)."""
        self._in_message = False
        """The parser has begun a request and not finished it."""
        self._head_bytes = 0
        self._tail = b""
        """The last bytes of an unfinished head, where a blank line split across two reads begins."""
        self._body_left: int | None = 0
        """Body bytes still to come (None: chunked, its end known only to the parser)."""
        self._head_started: float | None = None
        self._body_seen = 0.0
        self._heads = 0
        """Requests whose head was read (each is owed one answer)."""
        self._answered = 0
        self._over_cap = False
        self._refused = False
        self._pending: tuple[bytes, int] | None = None
        """A refusal waiting for the answers owed before it: (its bytes, answers needed first)."""
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._linger_timer: asyncio.TimerHandle | None = None

    # -- the connection
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's
        super().connection_made(transport)
        self._over_cap = len(self.connections) > self.bounds.max_connections
        self._head_started = self.loop.time()  # the first head is timed from the connection's opening
        self._head_timer = self.loop.call_later(self.bounds.head_timeout, self._head_deadline)

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._head_timer, self._body_timer, self._linger_timer):
            if timer is not None:
                timer.cancel()  # a pending timer would keep this protocol (and what it read) alive until it fires
        self._head_timer = self._body_timer = self._linger_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # refused (or lingering after a refusal): what the client still sends is dropped unread
        unset_keepalive(self)
        if self._reading_head and not self._in_message and self._one_whole_request(data):
            self._feed(data)  # the usual case, in one call: a head within the bounds and the body it declares
        else:
            rest: bytes | None = data
            while rest:
                rest = self._read_head(rest) if self._reading_head else self._read_body(rest)
        if self._refused:
            return
        if self._reading_head:
            if self._head_started is not None and self._head_timer is None:
                waited = self.loop.time() - self._head_started
                self._head_timer = self.loop.call_later(self.bounds.head_timeout - waited, self._head_deadline)
        elif self._body_timer is None:
            self._body_timer = self.loop.call_later(self.bounds.body_timeout, self._body_deadline)

    def _one_whole_request(self, data: bytes) -> bool:
        """`data` is one request's head, within the byte cap, and exactly the body its `Content-Length` declares
        (or nothing more): fed whole, its bytes are counted exactly as the head-then-body path would count them.

        The length is only a hint read here (in the two usual spellings; any other takes the other path); the
        parser reads it again, and refuses the request if it is doubled or sent with `Transfer-Encoding`, so
        a wrong hint never reaches a body.
        """
        end = data.find(END_OF_HEAD)
        if end <= 0 or end + 4 > self.bounds.max_head_bytes or data[0] in _CR_LF:
            return False
        end += 4
        self._head_bytes = end
        if end == len(data):
            return True
        start = data.find(b"\r\nContent-Length:", 0, end)
        if start < 0:
            start = data.find(b"\r\ncontent-length:", 0, end)
            if start < 0:
                return False
        start += 17
        try:
            length = int(data[start : data.index(b"\r", start)])
        except ValueError:
            return False
        return end + length == len(data)

    def _read_head(self, data: bytes) -> bytes | None:
        """Count and feed the head's bytes up to its blank line; the rest (a body, a next request) is returned."""
        if self._head_started is None:
            self._head_started = self.loop.time()  # a later request's head: timed from its first byte
        if self._in_message:
            tail = self._tail
            found = (tail + data).find(END_OF_HEAD) if tail else data.find(END_OF_HEAD)
            end = -1 if found < 0 else found + len(END_OF_HEAD) - len(tail)
        else:
            # Blank lines before a request line are allowed (the parser skips them): they are not its end.
            start = len(data) - len(data.lstrip(b"\r\n"))
            found = data.find(END_OF_HEAD, start)
            end = -1 if found < 0 else found + len(END_OF_HEAD)
        take = len(data) if end < 0 else end
        self._head_bytes += take
        if self._head_bytes > self.bounds.max_head_bytes:
            self._refuse(431, f"request head larger than {self.bounds.max_head_bytes} bytes")
            return None
        if end < 0:
            self._tail = (self._tail + data[-3:])[-3:]
        return data[take:] if self._feed(data if end < 0 else data[:take]) else None

    def _read_body(self, data: bytes) -> bytes | None:
        """Feed the body: exactly what is left of it, or a slice of a chunked one; the rest is returned."""
        self._body_seen = self.loop.time()
        left = self._body_left
        take = min(len(data), CHUNKED_SLICE if left is None else left) or len(data)
        if not self._feed(data if take == len(data) else data[:take]):
            return None
        if left is None and self._reading_head and self._in_message:
            # A request pipelined behind a chunked body began inside this slice: count the slice as its head.
            self._head_bytes = take
            self._tail = data[max(0, take - 3) : take]
        return data[take:]

    def _feed(self, data: bytes) -> bool:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse(400, "protocol upgrades (Upgrade, CONNECT) are not supported")
        except httptools.HttpParserError as exc:
            self._refuse(400, f"malformed HTTP request: {exc}")  # no-op when a callback refused it first
        return not self._refused

    # -- parser callbacks
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_message = True

    def on_header(self, name: bytes, value: bytes) -> None:
        """uvicorn's, inlined (it runs for every header), with the count bounded."""
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100_continue = True
        headers = self.headers
        headers.append((name, value))
        if len(headers) > self.bounds.max_headers:
            self._refuse(431, f"more than {self.bounds.max_headers} header fields")
            raise _Refused

    def on_headers_complete(self) -> None:
        length: int | None = 0
        upgrade = self.parser.should_upgrade()  # Connection: upgrade with Upgrade, or CONNECT
        for name, value in self.headers:
            if name == b"content-length":
                length = int(value)  # the parser has already refused a bad or doubled one
            elif name == b"transfer-encoding":
                length = None  # chunked: the parser finds its end
            elif name == b"upgrade":
                upgrade = True
        if upgrade:
            self._refuse(400, "protocol upgrades (Upgrade, CONNECT) are not supported")
            raise _Refused
        if self._over_cap:
            self._refuse(
                503, f"this worker has {self.bounds.max_connections} connections open; try again", retry_after=1
            )
            raise _Refused
        self._reading_head = False
        self._head_started = None
        self._tail = b""
        self._body_left = length
        self._body_seen = self.loop.time()
        self._heads += 1
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_message = False
        self._reading_head = True
        self._head_bytes = 0
        self._tail = b""
        super().on_message_complete()

    def on_body(self, body: bytes) -> None:
        if self._body_left is not None:
            self._body_left -= len(body)
        super().on_body(body)

    # -- deadlines
    def timeout_keep_alive_handler(self) -> None:
        """uvicorn's idle timeout, armed when an answer completes; not for a request already under way (say a
        pipelined head that was partly read), which its own deadline governs."""
        if not self._in_message:
            super().timeout_keep_alive_handler()

    def _head_deadline(self) -> None:
        self._head_timer = None
        started = self._head_started
        if self._refused or not self._reading_head or started is None:
            return  # no head awaited now; the timer is armed again when one starts
        waited = self.loop.time() - started
        if waited < self.bounds.head_timeout or self.flow.read_paused:
            # Not yet, or the worker itself holds reading back (a pipelined request waits its turn).
            remaining = self.bounds.head_timeout - waited if not self.flow.read_paused else self.bounds.head_timeout
            self._head_timer = self.loop.call_later(remaining, self._head_deadline)
            return
        if self._head_bytes == 0:
            self._refused = True
            self.transport.close()  # it never sent anything: nothing to answer (as an idle keep-alive closes)
            return
        self._refuse(408, f"the request head did not arrive within {self.bounds.head_timeout:g} s")

    def _body_deadline(self) -> None:
        self._body_timer = None
        if self._refused or self._reading_head or not self._in_message:
            return
        now = self.loop.time()
        cycle = self.cycle
        if self.flow.read_paused or (cycle is not None and cycle.waiting_for_100_continue):
            self._body_seen = now  # the worker holds the body back, not the client: the pause is not counted
        idle = now - self._body_seen
        if idle < self.bounds.body_timeout:
            self._body_timer = self.loop.call_later(self.bounds.body_timeout - idle, self._body_deadline)
            return
        self._refuse(408, f"the request body stalled: nothing for {self.bounds.body_timeout:g} s")

    # -- refusing
    def _refuse(self, status: int, message: str, *, retry_after: int = 0) -> None:
        """Answer the request being read with `status`, after the answers owed before it; then close."""
        if self._refused:
            return
        self._refused = True
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = None
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "?"
        logger.info("refused a request from %s: %d %s", client, status, message)
        response = refusal(status, message, self.server_state.default_headers, retry_after=retry_after)
        if self._reading_head:
            owed_before = self._heads  # its head was never handed on: every request read before it comes first
        else:
            owed_before = self._heads - 1  # the current request, whose body was being read
            cycle = self.cycle
            if cycle.response_started:
                # It has its answer already (say a 413 before its body ended), or is mid-answer: nothing more
                # can be said on this connection; it closes once that answer is out.
                cycle.keep_alive = False
                if cycle.response_complete:
                    self.transport.close()
                return
            cycle.disconnected = True  # its app sees the client gone, and anything it sends is dropped
            cycle.message_event.set()
        if self._answered >= owed_before:
            self._send_refusal(response)
        else:
            self._pending = (response, owed_before)
            self.flow.pause_reading()

    def on_response_complete(self) -> None:
        self._answered += 1
        pending = self._pending
        if pending is None or self._answered < pending[1]:
            super().on_response_complete()
            return
        self._pending = None
        self.server_state.total_requests += 1
        if not self.transport.is_closing():
            self._send_refusal(pending[0])

    def _send_refusal(self, response: bytes) -> None:
        """Write the refusal, half-close, and drop what still comes for at most the head deadline."""
        unset_keepalive(self)
        transport = self.transport
        transport.write(response)
        if transport.can_write_eof():
            transport.write_eof()
        self.flow.resume_reading()  # read (and drop) what the client still sends, so it can read the answer
        self._linger_timer = self.loop.call_later(self.bounds.head_timeout, transport.close)
