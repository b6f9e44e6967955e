"""The worker's own listener against hostile connections, over raw sockets (`mrtr_worker.listener.bounded_http`).

A real worker process runs with short deadlines (`HEAD_SECONDS`, `BODY_SECONDS`) and the default
size bounds. Each test sends what a hostile or broken client sends (a slow or huge head, a body
that stops, a flood of headers or connections, an `Upgrade`, pipelined and smuggled requests),
asserts the refusal (status, JSON-RPC body, the connection closed), and then, through the
module's autouse check, that the worker still serves a normal call with its connections closed
and its memory within `RSS_BOUND` of where it started. No test sleeps out a deadline: each
waits for the worker to answer and close.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mrtr_ops.local.process import ManagedProcess, WorkerSpec
from mrtr_ops.waiting import wait_until
from mrtr_protocol.wire import encode_request, request_headers, request_meta
from mrtr_worker.config import WorkerSettings
from tests.conftest import StartWorker
from tests.support.listener_probe import (
    Response,
    connect,
    exchange,
    open_sockets,
    read_until_closed,
    request,
    responses,
    rss_bytes,
    send_until_answered,
    server_side,
)

HEAD_SECONDS = 2.0
BODY_SECONDS = 2.0
MAX_HEAD = WorkerSettings.model_fields["max_head_bytes"].default
MAX_HEADERS = WorkerSettings.model_fields["max_headers"].default
RSS_BOUND = 32 * 1024 * 1024
"""How far above its starting point the worker's resident memory may be after any test here."""
MiB = 1024 * 1024

Worker = tuple[WorkerSpec, ManagedProcess]


@pytest.fixture(scope="module")
def bounded(start_worker: StartWorker) -> Worker:
    env = {"MRTR_WORKER_HEAD_TIMEOUT_SECONDS": str(HEAD_SECONDS), "MRTR_WORKER_BODY_TIMEOUT_SECONDS": str(BODY_SECONDS)}
    return start_worker(env=env)


@pytest.fixture(scope="module")
def baseline(bounded: Worker) -> tuple[int, int]:
    """(resident bytes, open sockets) after the worker has served some ordinary calls."""
    spec, process = bounded
    for _ in range(20):
        assert _tools_listed(spec.port)
    return rss_bytes(process.pid), _idle_sockets(bounded)


def _idle_sockets(worker: Worker) -> int:
    """The worker's open sockets with no connection to it (its listener and its event loop's own)."""
    spec, process = worker
    wait_until(lambda: not server_side(spec.port), timeout=30, what="the connections to the worker to close")
    return open_sockets(process.pid)


@pytest.fixture(autouse=True)
def _still_serving(bounded: Worker, baseline: tuple[int, int]) -> Iterator[None]:
    """After each test: every connection it opened is closed, a normal call is served, memory is back in bounds."""
    yield
    spec, process = bounded
    rss, sockets = baseline
    wait_until(lambda: open_sockets(process.pid) <= sockets, timeout=30, what="the test's connections to close")
    assert _tools_listed(spec.port)
    grown = rss_bytes(process.pid) - rss
    assert grown <= RSS_BOUND, f"resident memory {grown / MiB:.1f} MiB above the start"


def _tools_list(port: int, *, extra: dict[str, str] | None = None) -> bytes:
    params = {"_meta": request_meta({})}
    body = encode_request(1, "tools/list", params)
    return request("POST", "/mcp", port, body=body, headers=request_headers("tools/list", params, extra))


def _tools_listed(port: int) -> bool:
    (answer,) = exchange(port, _tools_list(port, extra={"Connection": "close"}))
    return answer.status == 200 and "tools" in json.loads(answer.body)["result"]


def _refusal(answer: Response, status: int, words: str) -> None:
    """One refusal as the listener writes it: the status, a JSON-RPC error naming the problem, Connection: close."""
    assert answer.status == status, answer
    assert answer.headers["connection"] == "close"
    assert answer.headers["content-type"] == "application/json"
    message: dict[str, Any] = json.loads(answer.body)
    assert message["jsonrpc"] == "2.0"
    assert message["id"] is None
    assert words in message["error"]["message"], message


def _head_of(size: int, port: int, *, close: bool = False) -> bytes:
    """A GET /healthz whose head (request line to blank line) is exactly `size` bytes, padded by one header."""
    start = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{'Connection: close' if close else 'X-Keep: 1'}\r\n"
    start += "X-Pad: "
    return start.encode() + b"a" * (size - len(start) - 4) + b"\r\n\r\n"


# --- huge heads ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reads", ["one read", "two reads", "with a body"])
def test_a_head_of_exactly_the_cap_is_served_and_one_byte_more_is_431(bounded: Worker, reads: str) -> None:
    """Counted to the byte whether the head comes in one read, in two, or with its body behind it."""
    port = bounded[0].port
    for size in (MAX_HEAD, MAX_HEAD + 1):
        if reads == "with a body":
            whole = _tools_list(port, extra={"Connection": "close", "X-Pad": ""})
            head_size = whole.index(b"\r\n\r\n") + 4
            data = whole.replace(b"X-Pad: ", b"X-Pad: " + b"a" * (size - head_size), 1)
        else:
            data = _head_of(size, port, close=True)
        assert data.index(b"\r\n\r\n") + 4 == size
        with connect(port) as sock:
            if reads == "two reads":
                sock.sendall(data[: size // 2])
                wait_until(lambda: not any(server_side(port)), timeout=30, what="the worker to read the first half")
                data = data[size // 2 :]
            sock.sendall(data)
            (answer,) = responses(read_until_closed(sock))
        if size == MAX_HEAD:
            assert answer.status == 200, answer
        else:
            _refusal(answer, 431, f"request head larger than {MAX_HEAD} bytes")


def test_a_pipelined_head_over_the_cap_is_counted_from_its_first_byte(bounded: Worker) -> None:
    """Behind a request with a body, in the same read: the first is served, the second refused by its own size."""
    port = bounded[0].port
    listed, refused = exchange(port, _tools_list(port) + _head_of(MAX_HEAD + 1, port))
    assert listed.status == 200
    _refusal(refused, 431, f"request head larger than {MAX_HEAD} bytes")
    listed, health = exchange(port, _tools_list(port) + _head_of(MAX_HEAD, port, close=True))
    assert (listed.status, health.status) == (200, 200)


@pytest.mark.parametrize("where", ["one header", "the path", "many headers"])
def test_a_huge_head_is_refused_at_the_cap_not_read_whole(bounded: Worker, where: str) -> None:
    """64 MiB offered; the 431 comes after the cap (plus what the sockets buffer), and the worker's memory stays."""
    spec, process = bounded
    before = rss_bytes(process.pid)
    total = 64 * MiB
    if where == "one header":
        start = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Huge: "
        chunks: Iterator[bytes] = _stream(start, b"h" * 65536, total)
    elif where == "the path":
        chunks = _stream(b"GET /healthz?", b"q" * 65536, total)
    else:
        start = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        chunks = _stream(start, b"X-Many: " + b"m" * 400 + b"\r\n", total)  # the byte cap comes before the count
    with connect(spec.port) as sock:
        answers, sent = send_until_answered(sock, chunks)
    (refused,) = answers
    _refusal(refused, 431, "request head larger than")
    assert sent < total // 4, f"{sent} bytes were taken before the refusal"
    assert rss_bytes(process.pid) - before < 16 * MiB


def _stream(start: bytes, piece: bytes, total: int) -> Iterator[bytes]:
    yield start
    for _ in range(total // len(piece)):
        yield piece


def test_a_flood_of_headers_is_431_past_the_count(bounded: Worker) -> None:
    port = bounded[0].port
    fields = {"Connection": "close", **{f"X-F{i}": "1" for i in range(MAX_HEADERS - 2)}}
    at_limit = request("GET", "/healthz", port, headers=fields)
    (served,) = exchange(port, at_limit)
    assert served.status == 200
    flood = request("GET", "/healthz", port, headers={f"X-F{i}": "1" for i in range(MAX_HEADERS)})
    (refused,) = exchange(port, flood)
    _refusal(refused, 431, f"more than {MAX_HEADERS} header fields")


# --- slow heads and bodies -----------------------------------------------------------------------------------


def test_a_head_that_stops_gets_408_and_the_connection_closes(bounded: Worker) -> None:
    port = bounded[0].port
    (refused,) = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    _refusal(refused, 408, "the request head did not arrive within")


def test_a_head_dribbled_a_byte_at_a_time_gets_408(bounded: Worker) -> None:
    """Slowloris: every byte comes well within any read timeout, the whole head never within the deadline."""
    endless = (bytes([byte]) for byte in b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: " + b"s" * 10_000)
    with connect(bounded[0].port) as sock:
        answers, sent = send_until_answered(sock, _paced(endless, HEAD_SECONDS / 10))
    (refused,) = answers
    _refusal(refused, 408, "the request head did not arrive within")
    assert sent < 1000


def _paced(chunks: Iterator[bytes], seconds: float) -> Iterator[bytes]:
    for chunk in chunks:
        yield chunk
        time.sleep(seconds)  # the client's pace, not a wait for the worker


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(bounded: Worker) -> None:
    with connect(bounded[0].port) as sock:
        assert read_until_closed(sock) == b""


def test_a_stalled_head_behind_an_answered_request_gets_408_after_the_answer(bounded: Worker) -> None:
    port = bounded[0].port
    with connect(port) as sock:
        sock.sendall(request("GET", "/healthz", port) + b"GET /readyz HTTP/1.1\r\n")
        first, refused = responses(read_until_closed(sock))
    assert first.status == 200
    _refusal(refused, 408, "the request head did not arrive within")


def test_a_body_that_stops_gets_408_and_the_connection_closes(bounded: Worker) -> None:
    port = bounded[0].port
    whole = _tools_list(port)
    (refused,) = exchange(port, whole[:-10])
    _refusal(refused, 408, "the request body stalled")


def test_a_chunked_body_that_stops_gets_408(bounded: Worker) -> None:
    port = bounded[0].port
    params = {"_meta": request_meta({})}
    head = request(
        "POST", "/mcp", port, headers={**request_headers("tools/list", params), "Transfer-Encoding": "chunked"}
    )
    (refused,) = exchange(port, head + b'40\r\n{"jsonrpc": "2.0"')
    _refusal(refused, 408, "the request body stalled")


def test_a_slow_body_that_keeps_moving_is_served(bounded: Worker) -> None:
    """The body deadline is between two reads, not for the whole body: a body slower than it in total is served."""
    port = bounded[0].port
    whole = _tools_list(port, extra={"Connection": "close"})
    tail = 8
    with connect(port) as sock:
        sock.sendall(whole[:-tail])
        for byte in whole[-tail:]:
            time.sleep(BODY_SECONDS / 6)  # the client's pace: 8 pauses of a sixth of the deadline
            sock.sendall(bytes([byte]))
        (answer,) = responses(read_until_closed(sock))
    assert answer.status == 200
    assert "tools" in json.loads(answer.body)["result"]


# --- one answer per request ----------------------------------------------------------------------------------

UPGRADES = {
    "websocket": "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    "h2c": "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
    "HTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
    "upgrade without connection": "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: h2c\r\n\r\n",
    "connect": "CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n",
    "connect with a path": "CONNECT /admin/state HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
}


@pytest.mark.parametrize("case", list(UPGRADES))
def test_an_upgrade_or_connect_is_refused_once_and_the_connection_closed(bounded: Worker, case: str) -> None:
    """Whatever follows (here a request for /readyz, or a tunnel's bytes) is never read as a request."""
    port = bounded[0].port
    after = request("GET", "/readyz", port)
    (refused,) = exchange(port, UPGRADES[case].encode() + after)
    _refusal(refused, 400, "protocol upgrades (Upgrade, CONNECT) are not supported")


def test_pipelined_requests_are_answered_once_each_in_order(bounded: Worker) -> None:
    port = bounded[0].port
    params = {"_meta": request_meta({})}
    chunked = request(
        "POST", "/mcp", port, headers={**request_headers("tools/list", params), "Transfer-Encoding": "chunked"}
    )
    body = encode_request(2, "tools/list", params)
    chunked += b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    stream = (
        request("GET", "/healthz", port)
        + _tools_list(port)
        + chunked
        + request("GET", "/readyz", port, headers={"Connection": "close"})
    )
    health, listed, listed_chunked, ready = exchange(port, stream)
    assert [a.status for a in (health, listed, listed_chunked, ready)] == [200, 200, 200, 200]
    assert json.loads(health.body)["status"] == "alive"
    assert "tools" in json.loads(listed.body)["result"]
    assert json.loads(listed_chunked.body)["id"] == 2
    assert json.loads(ready.body)["ready"] is True
    assert json.loads(ready.body)["slow"] is False  # not stepping aside (`MRTR_WORKER_STEP_ASIDE` is off)


def test_a_refusal_behind_pipelined_requests_comes_after_their_answers(bounded: Worker) -> None:
    port = bounded[0].port
    stream = _tools_list(port) + request("GET", "/healthz", port) + UPGRADES["websocket"].encode() + _tools_list(port)
    listed, health, refused = exchange(port, stream)
    assert (listed.status, health.status) == (200, 200)
    _refusal(refused, 400, "protocol upgrades")


SMUGGLED = request("GET", "/readyz", 0)


def _post(*fields: str) -> str:
    return "POST /healthz HTTP/1.1\r\nHost: x\r\n" + "".join(f"{field}\r\n" for field in fields) + "\r\n"


SMUGGLING = {
    "CL and TE": _post("Content-Length: 4", "Transfer-Encoding: chunked") + "0\r\n\r\n",
    "TE and CL": _post("Transfer-Encoding: chunked", "Content-Length: 4") + "0\r\n\r\n",
    "two Content-Lengths": _post("Content-Length: 0", "Content-Length: 5") + "abcde",
    "two equal Content-Lengths": _post("Content-Length: 4", "Content-Length: 4") + "abcd",
    "obs-fold": "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n",
    "obs-fold of Transfer-Encoding": _post("Transfer-Encoding:\r\n chunked") + "0\r\n\r\n",
    "bare LF": "GET /healthz HTTP/1.1\nHost: x\n\n",
    "bare LF ending the head": "GET /healthz HTTP/1.1\r\nHost: x\r\n\n",
    "bare LF in a chunk": _post("Transfer-Encoding: chunked") + "4\nabcd\r\n0\r\n\r\n",
    "space before colon": _post("Transfer-Encoding : chunked") + "0\r\n\r\n",
    "TE identity": _post("Transfer-Encoding: identity"),
    "TE chunked not last": _post("Transfer-Encoding: chunked, gzip"),
    "signed Content-Length": _post("Content-Length: +4") + "abcd",
    "NUL in a header": "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
    "HTTP/2 preface": "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
}


@pytest.mark.parametrize("case", list(SMUGGLING))
def test_smuggling_variants_are_refused_and_nothing_behind_them_is_answered(bounded: Worker, case: str) -> None:
    port = bounded[0].port
    (refused,) = exchange(port, SMUGGLING[case].encode("latin-1") + SMUGGLED)
    _refusal(refused, 400, "malformed HTTP request")


# --- connections and memory ----------------------------------------------------------------------------------

CAP = 4


@pytest.fixture(scope="module")
def capped(start_worker: StartWorker) -> Worker:
    """A worker that takes four connections; heads may take their time, so the held connections stay."""
    env = {"MRTR_WORKER_MAX_CONNECTIONS": str(CAP), "MRTR_WORKER_HEAD_TIMEOUT_SECONDS": "60"}
    return start_worker(env=env)


def test_a_connection_past_the_cap_gets_503_and_the_held_ones_are_still_served(capped: Worker) -> None:
    spec, process = capped
    idle = _idle_sockets(capped)
    held = [connect(spec.port) for _ in range(CAP)]
    try:
        for sock in held:
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # a head under way: the connection counts
        wait_until(lambda: open_sockets(process.pid) >= idle + CAP, timeout=30, what=f"{CAP} connections accepted")
        (busy,) = exchange(spec.port, request("GET", "/healthz", spec.port))
        _refusal(busy, 503, f"this worker has {CAP} connections open")
        assert busy.headers["retry-after"] == "1"
        assert json.loads(busy.body)["error"]["code"] == -32000
        for sock in held:
            sock.sendall(f"Host: 127.0.0.1:{spec.port}\r\nConnection: close\r\n\r\n".encode())
            (served,) = responses(read_until_closed(sock))
            assert served.status == 200
    finally:
        for sock in held:
            sock.close()
    wait_until(lambda: open_sockets(process.pid) <= idle, timeout=30, what="the held connections to close")
    assert _tools_listed(spec.port)


@pytest.fixture(scope="module")
def patient(start_worker: StartWorker) -> Worker:
    """A worker whose heads may take a minute: a flood's connections stay open until the test closes them."""
    return start_worker(env={"MRTR_WORKER_HEAD_TIMEOUT_SECONDS": "60"})


FLOOD = 300
WAVES = 8
KEPT_BOUND = 16 * MiB
"""Resident memory the floods may leave behind (the allocator keeps some for reuse): a fraction of what they sent."""


def test_floods_of_near_cap_heads_give_their_memory_back(patient: Worker, capsys: pytest.CaptureFixture[str]) -> None:
    """Waves of 300 connections, each holding a head just under the cap; memory is measured, not assumed.

    Half the heads are many header fields, half one long field (the parser accumulates that one itself).
    Each wave is measured once the worker has read every byte (its receive queues empty), and again
    after every connection closed: what the waves held must not stay, and must not grow wave after wave.
    """
    spec, process = patient
    for _ in range(20):
        assert _tools_listed(spec.port)
    idle = _idle_sockets(patient)
    start = rss_bytes(process.pid)
    fields = b"".join(b"X-Pad-%02d: %s\r\n" % (i, b"p" * 330) for i in range(MAX_HEADERS - 10))
    many = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + fields
    one = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: " + b"l" * (MAX_HEAD - 1024)
    assert MAX_HEAD - 2048 < len(many) < MAX_HEAD
    held, after = [], []
    for _ in range(WAVES):
        socks = [connect(spec.port) for _ in range(FLOOD)]
        try:
            for i, sock in enumerate(socks):
                sock.sendall(many if i % 2 else one)
            wait_until(
                lambda: (q := server_side(spec.port)) and len(q) >= FLOOD and not any(q),
                timeout=60,
                what="the worker to read every head of the wave",
            )
            held.append(rss_bytes(process.pid))
        finally:
            for sock in socks:
                sock.close()
        wait_until(lambda: open_sockets(process.pid) <= idle, timeout=60, what="the wave's connections to close")
        assert _tools_listed(spec.port)
        after.append(rss_bytes(process.pid))
    sent = WAVES * FLOOD * (len(many) + len(one)) // 2
    holding = [round((h - start) / MiB, 1) for h in held]
    kept = [round((a - start) / MiB, 1) for a in after]
    with capsys.disabled():
        print(f"\nflood: {WAVES} waves x {FLOOD} heads, {sent / MiB:.0f} MiB sent; from {start / MiB:.0f} MiB resident")
        print(f"flood: above it while holding {holding} MiB, after closing {kept} MiB")
    assert sent > 4 * KEPT_BOUND
    assert after[-1] - start < KEPT_BOUND  # not kept: a small part of what was sent stays resident
    assert after[-1] - after[0] < 8 * MiB  # and not growing wave after wave
