"""The request bounds at their edges, in process: the answers for exact bytes.

The front-door suite (``test_lb_front_door``) attacks the real process and
measures its memory; these pin exact boundaries: a head of exactly the cap is
served and one byte more is 431, the header count likewise, a pipelined head
the byte count cannot see whole, and which deadline applies when.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket

from tests.lb.standin import BIG, MakeBackend, MakeLB, jsonrpc_body, wait_until

CAP = 16 * 1024
HANG_GUARD = 10.0


async def _send(port: int, data: bytes) -> bytes:
    """Send ``data``; everything that comes back until the proxy closes (a reset after the answer counts)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = b""
    try:
        writer.write(data)
        await writer.drain()
        with contextlib.suppress(ConnectionError):
            while chunk := await asyncio.wait_for(reader.read(65536), HANG_GUARD):
                received += chunk
    finally:
        writer.close()
    return received


def _head_of(size: int, *, body: bytes = b"{}", close: bool = True) -> bytes:
    """A POST /mcp whose head (request line, headers, blank line) is exactly ``size`` bytes, then its body."""
    start = b"POST /mcp HTTP/1.1\r\nHost: lb\r\n" + (b"Connection: close\r\n" if close else b"")
    start += b"Content-Length: %d\r\n" % len(body)
    pads: list[bytes] = []
    left = size - len(start) - 2
    while left > 0:
        value = min(left - 12, 4000)  # "X-Pad-NN: " + value + CRLF; lines the stand-in's parser accepts
        line = b"X-Pad-%02d: %s\r\n" % (len(pads), b"p" * value)
        if len(line) > left:
            line = line[: left - 2] + b"\r\n"
        pads.append(line)
        left -= len(line)
    head = start + b"".join(pads) + b"\r\n"
    assert len(head) == size
    return head + body


def _statuses(raw: bytes) -> list[int]:
    return [int(part.split(b" ", 1)[0]) for part in raw.split(b"HTTP/1.1 ")[1:]]


async def test_a_head_of_exactly_the_cap_is_served_and_one_byte_more_is_431(
    make_backend: MakeBackend, make_lb: MakeLB
) -> None:
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url], max_head_size=CAP)
    served = await _send(lb.port, _head_of(CAP))
    assert _statuses(served) == [200]
    assert len(backend.seen) == 1
    refused = await _send(lb.port, _head_of(CAP + 1))
    assert _statuses(refused) == [431]
    assert json.loads(refused.partition(b"\r\n\r\n")[2])["error"]["message"] == f"request head larger than {CAP} bytes"
    assert len(backend.seen) == 1, "the refused head never reached the worker"


async def test_the_header_count_is_capped_exactly(make_backend: MakeBackend, make_lb: MakeLB) -> None:
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url], max_headers=10)
    # Host, Connection, Content-Length and seven more: ten lines.
    base = b"POST /mcp HTTP/1.1\r\nHost: lb\r\nConnection: close\r\nContent-Length: 2\r\n"
    ten = base + b"".join(b"X-%d: v\r\n" % n for n in range(7)) + b"\r\n{}"
    assert _statuses(await _send(lb.port, ten)) == [200]
    eleven = base + b"".join(b"X-%d: v\r\n" % n for n in range(8)) + b"\r\n{}"
    assert _statuses(await _send(lb.port, eleven)) == [431]


async def test_a_pipelined_head_over_the_cap_is_refused_after_the_one_before(
    make_backend: MakeBackend, make_lb: MakeLB
) -> None:
    """Both requests in one write: the second head's bytes arrive with the first request, and are still measured.

    The proxy answers the first, then refuses the second.
    """
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url], max_head_size=CAP)
    raw = await _send(lb.port, _head_of(1024, close=False) + _head_of(CAP + 200))
    assert _statuses(raw) == [200, 431]
    assert len(backend.seen) == 1


async def test_keep_alive_requests_each_get_their_own_head_deadline(make_backend: MakeBackend, make_lb: MakeLB) -> None:
    """The deadline of a later head runs from its first byte: an idle keep-alive gap before it is not counted.

    The first request is in the socket before the proxy accepts it (a blocking connect and send, which the kernel
    completes without the proxy): the proxy shares this event loop, and a write made from here after the accept
    could come later than the first head's deadline on a starved machine."""
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url], head_timeout=0.3, keepalive_timeout=30)

    def post() -> bytes:
        body = jsonrpc_body()
        return b"POST /mcp HTTP/1.1\r\nHost: lb\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    raw = socket.create_connection(("127.0.0.1", lb.port))
    raw.sendall(post())
    reader, writer = await asyncio.open_connection(sock=raw)
    try:
        for round_ in range(2):
            if round_:
                writer.write(post())
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HANG_GUARD)
            assert head.startswith(b"HTTP/1.1 200")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            await asyncio.sleep(0.5)  # idle past the head deadline, on purpose: the keep-alive idle is allowed
        writer.write(b"POST /mcp HTTP/1.1\r\nHost: lb\r\n")  # a head begun, never finished
        rest = await asyncio.wait_for(reader.read(), HANG_GUARD)
    finally:
        writer.close()
    assert _statuses(rest) == [408]
    assert len(backend.seen) == 2


async def test_an_idle_keep_alive_connection_is_closed_after_the_keepalive_timeout(
    make_backend: MakeBackend, make_lb: MakeLB
) -> None:
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url], keepalive_timeout=0.3)
    reader, writer = await asyncio.open_connection("127.0.0.1", lb.port)
    try:
        writer.write(b"GET /nothing HTTP/1.1\r\nHost: lb\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), HANG_GUARD)  # returns once the proxy closes
    finally:
        writer.close()
    assert _statuses(answer) == [404]


async def test_a_refusal_is_answered_even_when_the_client_keeps_sending(
    make_backend: MakeBackend, make_lb: MakeLB
) -> None:
    """The proxy stops reading a refused request but lingers before the close, so the client reads its answer."""
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url], max_body_size=1024)
    reader, writer = await asyncio.open_connection("127.0.0.1", lb.port)
    answer = asyncio.create_task(reader.read())
    try:
        writer.write(b"POST /mcp HTTP/1.1\r\nHost: lb\r\nTransfer-Encoding: chunked\r\n\r\n")
        with contextlib.suppress(ConnectionError):
            for _ in range(64):
                writer.write(b"4000\r\n" + b"x" * 0x4000 + b"\r\n")
                await writer.drain()
        raw = await asyncio.wait_for(answer, HANG_GUARD)
    finally:
        writer.close()
    assert _statuses(raw) == [413]
    assert backend.seen == []


async def test_a_client_that_reads_nothing_is_cut_after_the_send_timeout(
    make_backend: MakeBackend, make_lb: MakeLB
) -> None:
    """A slow reader cannot hold its connection (and its backend's) for ever: nginx's `send_timeout`.

    The client reads nothing (a bare socket: no stream reader drains it behind the test's back) until the
    backend has seen its response cut short (the proxy freed the upstream connection with the client's).
    """
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url], send_timeout=0.3)
    loop = asyncio.get_running_loop()
    raw = socket.socket()
    try:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window, before the connect
        raw.setblocking(False)
        await loop.sock_connect(raw, ("127.0.0.1", lb.port))
        await loop.sock_sendall(raw, b"GET /mcp HTTP/1.1\r\nHost: lb\r\nX-Test-Mode: big\r\n\r\n")

        async def cut() -> bool:
            return backend.cut_short == 1

        await wait_until(cut, within=HANG_GUARD * 3, what="the backend's response cut short")
        received = 0
        with contextlib.suppress(ConnectionError):
            while chunk := await asyncio.wait_for(loop.sock_recv(raw, 1 << 20), HANG_GUARD):
                received += len(chunk)
    finally:
        raw.close()
    assert 0 < received < BIG, "the connection was cut: the rest of the response never came"
    assert len(backend.seen) == 1
