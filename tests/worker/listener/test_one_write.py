"""A response's head and body leave in one write; streams still flush each event at once.

A real worker process answers JSON calls with one write(2) each (its
`/proc/<pid>/io` counters say so) and keeps keep-alive and `Connection: close`
as before. A stream is checked on a uvicorn server running `OneWriteProtocol`
in this process with a small ASGI app that waits for the test between
events: each part must arrive while the app is still waiting, so a head or an
event held back would show as a read that never completes.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from mrtr_ops.local.process import ManagedProcess, WorkerSpec
from mrtr_ops.waiting import wait_until
from mrtr_protocol.wire import encode_request, request_headers, request_meta
from mrtr_worker.listener.one_write import HeadHoldingTransport, OneWriteProtocol
from tests.conftest import StartWorker

ANSWERS = 20
READ_SECONDS = 10.0
"""A read that does not complete in this long means the bytes were held back (not a timing assertion)."""


def _echo_request(port: int, request_id: int, *, close: bool = False) -> bytes:
    params = {"name": "echo", "arguments": {"text": "one write"}, "_meta": request_meta({})}
    body = encode_request(request_id, "tools/call", params)
    headers = {**request_headers("tools/call", params), "Content-Length": str(len(body)), "Host": f"127.0.0.1:{port}"}
    if close:
        headers["Connection"] = "close"
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return f"POST /mcp HTTP/1.1\r\n{head}\r\n".encode() + body


def _split(reply: bytes) -> tuple[bytes, dict[str, str], bytes]:
    head, _, body = reply.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    fields = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return status.encode(), fields, body


@pytest.fixture(scope="module")
def worker_process(start_worker: StartWorker) -> tuple[WorkerSpec, ManagedProcess]:
    return start_worker()


@pytest.fixture
def connection(worker_process: tuple[WorkerSpec, ManagedProcess]) -> Iterator[socket.socket]:
    sock = socket.create_connection(("127.0.0.1", worker_process[0].port), timeout=READ_SECONDS)
    yield sock
    sock.close()


def _write_syscalls(pid: int) -> int:
    """The process's write(2)-family calls so far (libuv sends a TCP stream's data with write or writev)."""
    with open(f"/proc/{pid}/io") as counters:
        return next(int(line.split()[1]) for line in counters if line.startswith("syscw:"))


def _exchange(connection: socket.socket, port: int, request_id: int) -> tuple[bool, bytes, dict[str, str], bytes]:
    """One echo call: whether the first read held the whole answer, then its status, headers and body."""
    connection.sendall(_echo_request(port, request_id))
    status, fields, body = _split(_read_until(connection, connection.recv(65536), b"\r\n\r\n"))
    whole = len(body) == int(fields["content-length"])
    while len(body) < int(fields["content-length"]):
        body += connection.recv(65536)
    return whole, status, fields, body


def test_a_json_answer_is_one_write_and_arrives_whole(
    connection: socket.socket, worker_process: tuple[WorkerSpec, ManagedProcess]
) -> None:
    port, pid = connection.getpeername()[1], worker_process[1].pid
    _exchange(connection, port, 0)  # warm: the first call may log or load something
    before = _write_syscalls(pid)
    first_reads_whole = []
    for request_id in range(1, ANSWERS + 1):  # on one keep-alive connection
        whole, status, fields, body = _exchange(connection, port, request_id)
        first_reads_whole.append(whole)
        assert status == b"HTTP/1.1 200 OK"
        assert fields["content-type"] == "application/json"
        answer = json.loads(body)
        assert answer["id"] == request_id
        assert answer["result"]["content"][0]["text"] == "one write"
    writes = _write_syscalls(pid) - before
    assert writes < 1.5 * ANSWERS, f"{writes} writes for {ANSWERS} answers (uvicorn alone makes two per answer)"
    assert all(first_reads_whole), "the head came apart from the body"


def test_connection_close_still_closes_after_the_answer(connection: socket.socket) -> None:
    connection.sendall(_echo_request(connection.getpeername()[1], 3, close=True))
    received = b""
    while chunk := connection.recv(65536):  # ends when the worker closes the connection
        received += chunk
    status, fields, body = _split(received)
    assert status == b"HTTP/1.1 200 OK"
    assert fields["connection"] == "close"
    assert json.loads(body)["id"] == 3


class _PacedStream:
    """An ASGI app streaming three events, each only once the test says so; `/json` answers in one go."""

    def __init__(self) -> None:
        self.go = threading.Semaphore(0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/json":
            body = b'{"ok":true}'
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for number in range(3):
            await asyncio.to_thread(self.go.acquire)
            event = f"data: {number}\r\n\r\n".encode()
            await send({"type": "http.response.body", "body": event, "more_body": number < 2})


@pytest.fixture(scope="module")
def paced() -> Iterator[tuple[_PacedStream, int]]:
    app = _PacedStream()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, http=OneWriteProtocol, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, timeout=READ_SECONDS, what="the in-process uvicorn server to start")
    port = server.servers[0].sockets[0].getsockname()[1]
    yield app, port
    for _ in range(3):
        app.go.release()  # a test that failed midway leaves the app waiting
    server.should_exit = True
    thread.join(READ_SECONDS)


def _read_until(sock: socket.socket, buffer: bytes, marker: bytes) -> bytes:
    while marker not in buffer:
        chunk = sock.recv(65536)
        assert chunk, f"the connection ended before {marker!r}"
        buffer += chunk
    return buffer


def test_a_stream_s_head_and_each_event_arrive_while_the_app_waits(paced: tuple[_PacedStream, int]) -> None:
    app, port = paced
    with socket.create_connection(("127.0.0.1", port), timeout=READ_SECONDS) as sock:
        sock.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        received = _read_until(sock, b"", b"\r\n\r\n")  # the head, before any event exists
        assert received.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"transfer-encoding: chunked" in received
        for number in range(3):
            assert f"data: {number}".encode() not in received
            app.go.release()
            received = _read_until(sock, received, f"data: {number}\r\n\r\n\r\n".encode())
        received = _read_until(sock, received, b"0\r\n\r\n")
        sock.sendall(b"GET /json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # the connection is still good
        reply = sock.recv(65536)
        assert reply.startswith(b"HTTP/1.1 200 OK\r\n")
        assert reply.endswith(b'\r\n\r\n{"ok":true}')


class _Recorder(asyncio.Transport):
    """Stands in for the socket transport under `HeadHoldingTransport`: records writes and a close."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def test_the_transport_joins_a_head_with_the_next_write_and_never_reorders() -> None:
    async def scenario() -> list[list[bytes]]:
        loop = asyncio.get_running_loop()
        seen = []
        inner = _Recorder()
        transport = HeadHoldingTransport(inner, loop)
        transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        transport.write(b"{}")
        seen.append(list(inner.writes))  # same turn: one write
        inner.writes.clear()
        transport.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        seen.append(list(inner.writes))  # held
        await asyncio.sleep(0)
        seen.append(list(inner.writes))  # the turn ended: sent alone
        inner.writes.clear()
        transport.write(b"7\r\ndata: 1\r\n")
        seen.append(list(inner.writes))  # an event passes straight through
        inner.writes.clear()
        transport.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        transport.close()
        seen.append([*inner.writes, b"closed" if inner.closed else b"open"])
        return seen

    head, stream_head = (
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
    )
    assert asyncio.run(scenario()) == [
        [head + b"{}"],
        [],
        [stream_head],
        [b"7\r\ndata: 1\r\n"],
        [b"HTTP/1.1 400 Bad Request\r\n\r\n", b"closed"],
    ]
