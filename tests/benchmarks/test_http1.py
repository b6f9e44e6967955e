"""The lean connection's HTTP/1.1 framing agrees with `http.client`: the same request bytes and reading of replies."""

from __future__ import annotations

import http.client
import io
import socket
from typing import Any, cast

import pytest

from benchmarks._http1 import HttpError, ReplyReader, RequestHead, host_header

MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "count_primes",
}


class _Recorder:
    """Stands in for http.client's socket: keeps what it is asked to send."""

    def __init__(self) -> None:
        self.sent = b""

    def sendall(self, data: bytes) -> None:
        self.sent += bytes(data)


def _http_client_bytes(host: str, port: int, target: str, headers: dict[str, str], body: bytes) -> bytes:
    conn = http.client.HTTPConnection(host, port)
    recorder = _Recorder()
    conn.sock = cast(socket.socket, recorder)
    conn.request("POST", target, body=body, headers=headers)
    return recorder.sent


@pytest.mark.parametrize(
    ("host", "port", "headers"),
    [
        ("127.0.0.1", 8080, MCP_HEADERS),
        ("example.test", 80, MCP_HEADERS),
        ("::1", 9000, {"Content-Type": "application/json"}),
        ("127.0.0.1", 8080, {}),
        ("127.0.0.1", 8080, {**MCP_HEADERS, "Authorization": "Bearer t0k", "X-Note": "caf\u00e9 "}),
        ("127.0.0.1", 8080, {"host": "elsewhere.test", "Accept-Encoding": "gzip"}),
        ("127.0.0.1", 8080, {"Content-Length": "3"}),
        ("127.0.0.1", 8080, {"Transfer-Encoding": "identity"}),
        ("127.0.0.1", 8080, {"X-Folded": "a\r\n b"}),
    ],
)
def test_the_request_head_is_what_http_client_sends(host: str, port: int, headers: dict[str, str]) -> None:
    body = b'{"jsonrpc": "2.0", "id": 7}'
    head = RequestHead("/mcp?x=1", host_header(host, port))
    ours = head.build(headers, len(body)) + body
    assert ours == _http_client_bytes(host, port, "/mcp?x=1", headers, body)
    assert head.build(headers, len(body)) + body == ours  # the kept encoding gives the same bytes
    other = b"{}"
    assert head.build(headers, len(other)) + other == _http_client_bytes(host, port, "/mcp?x=1", headers, other)


@pytest.mark.parametrize(
    "headers", [{" Lead": "x"}, {"A:B": "x"}, {"X-Injected": "a\r\nEvil: 1"}, {"": "x"}, {"X": "a\nb"}]
)
def test_a_header_http_client_refuses_is_refused(headers: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="Invalid header"):
        _http_client_bytes("127.0.0.1", 80, "/mcp", headers, b"{}")
    with pytest.raises(ValueError, match="Invalid header"):
        RequestHead("/mcp", host_header("127.0.0.1", 80)).build(headers, 2)


class _Drip:
    """A socket that hands out its bytes `size` at a time, then end of stream (a reply split anywhere)."""

    def __init__(self, data: bytes, size: int) -> None:
        self._data, self._size = data, size

    def recv(self, limit: int) -> bytes:
        chunk, self._data = self._data[: min(limit, self._size)], self._data[min(limit, self._size) :]
        return chunk

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(io.BytesIO(self._data))


def _as_http_client_reads(raw: bytes) -> tuple[int, dict[str, str], bytes, bool]:
    response = http.client.HTTPResponse(cast(socket.socket, _Drip(raw, len(raw))), method="POST")
    response.begin()
    body = response.read()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body, bool(response.will_close)


def _as_we_read(raw: bytes, size: int) -> tuple[int, dict[str, str], bytes, bool]:
    reply = ReplyReader(cast(socket.socket, _Drip(raw, size))).read()
    return reply.status, reply.headers, reply.body, reply.will_close


JSON_BODY = b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}'
SSE_BODY = b'event: message\r\ndata: {"jsonrpc":"2.0","method":"n"}\r\n\r\nevent: message\r\ndata: {"id":1}\r\n\r\n'
REPLIES = {
    "uvicorn json": b"HTTP/1.1 200 OK\r\ndate: Tue, 01 Dec 2026 07:35:23 GMT\r\nserver: uvicorn\r\n"
    + b"content-length: %d\r\ncontent-type: application/json\r\nx-worker-id: w2\r\nx-worker-version: 1\r\n\r\n"
    % len(JSON_BODY)
    + JSON_BODY,
    "chunked event stream with extensions and trailers": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    + b"Transfer-Encoding: chunked\r\n\r\n"
    + b"%x;ext=1\r\n%s\r\n" % (len(SSE_BODY[:40]), SSE_BODY[:40])
    + b"%X\r\n%s\r\n" % (len(SSE_BODY[40:]), SSE_BODY[40:])
    + b"0\r\nX-Trailer: t\r\n\r\n",
    "connection close": b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno",
    "no length: to the end": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + JSON_BODY,
    "HTTP/1.0": b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
    "HTTP/1.0 keep-alive": b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\n{}",
    "no content": b"HTTP/1.1 204 No Content\r\nX-Worker-Id: w1\r\n\r\n",
    "continue first": b"HTTP/1.1 100 Continue\r\nX-Skip: 1\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
    "no reason phrase, repeated header": b"HTTP/1.1 401\r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 0\r\n\r\n",
    "blanks around values": b"HTTP/1.1 200 OK\r\nX-A:  spaced \t\r\nContent-Length: 2\r\n\r\n{}",
    "trailers after a chunked body": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    + b"2\r\n{}\r\n0\r\nX-T: 1\r\n\r\n",
}


@pytest.mark.parametrize("name", list(REPLIES))
@pytest.mark.parametrize("size", [1, 7, 65536])
def test_a_reply_reads_as_http_client_reads_it(name: str, size: int) -> None:
    raw = REPLIES[name]
    assert _as_we_read(raw, size) == _as_http_client_reads(raw)


BROKEN = {
    "nothing": b"",
    "cut in the body": b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",
    "cut in a chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc",
    "bad chunk size": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
    "not HTTP": b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    "HTTP/2 status line": b"HTTP/2 200\r\n\r\n",
    "bad status": b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
    "non-ASCII digits": "HTTP/1.1 \u00b200 OK\r\nContent-Length: 0\r\n\r\n".encode("latin-1"),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_broken_reply_is_an_error_as_with_http_client(name: str) -> None:
    raw = BROKEN[name]
    with pytest.raises(http.client.HTTPException):
        _as_http_client_reads(raw)
    with pytest.raises(HttpError):
        _as_we_read(raw, 5)


STRICT = {
    "bare line feeds": b"HTTP/1.1 200 OK\nX-A: 1\nContent-Length: 2\n\n{}",
    "mixed line ends": b"HTTP/1.1 200 OK\r\nX-A: 1\nContent-Length: 2\r\n\r\n{}",
    "bare-LF head, CRLFs in the body": b"HTTP/1.1 200 OK\nX-A: 1\n\nbody\r\n\r\nmore",
    "obsolete line folding": b"HTTP/1.1 200 OK\r\nX-A: 1\r\n  two\r\nContent-Length: 2\r\n\r\n{}",
    "bad length": b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\nabc",
}


@pytest.mark.parametrize("name", list(STRICT))
def test_a_malformed_reply_http_client_accepts_is_an_error(name: str) -> None:
    """Deliberate difference: llhttp (httptools) is strict where http.client guesses. Our workers and proxy (and
    uvicorn, h11, HAProxy) never send these; a reply read two ways is a smuggling risk, so it is a transport error."""
    raw = STRICT[name]
    _as_http_client_reads(raw)  # accepted there
    with pytest.raises(HttpError):
        _as_we_read(raw, 5)


def test_a_head_cut_short_is_an_error() -> None:
    """http.client takes a head cut by the end of the stream as whole (and the empty rest as the body); that
    reply was cut, so it is a transport failure here, which the MRTR loop resends with the last state."""
    with pytest.raises(HttpError):
        _as_we_read(b"HTTP/1.1 200 OK\r\nContent-Le", 5)


def test_bytes_past_the_reply_are_noticed() -> None:
    """A server that speaks out of turn: the connection must not be used for the next request."""
    raw = REPLIES["HTTP/1.0 keep-alive"]
    reader = ReplyReader(cast(socket.socket, _Drip(raw + b"HTTP/1.1 200 OK\r\n", 65536)))
    assert reader.read().body == b"{}"
    assert reader.leftover
    fresh = ReplyReader(cast(socket.socket, _Drip(raw, 65536)))
    fresh.read()
    assert not fresh.leftover


def test_a_head_without_end_is_refused_before_it_grows_without_bound() -> None:
    endless: Any = _Drip(b"HTTP/1.1 200 OK\r\n" + b"X-A: " + b"a" * 1_000_000, 65536)
    with pytest.raises(HttpError):
        ReplyReader(cast(socket.socket, endless)).read()


def test_replies_in_turn_on_one_connection() -> None:
    """The parser is kept per connection: each read gets its own reply, nothing of the one before."""

    class _Turns:
        def __init__(self, replies: list[bytes]) -> None:
            self._replies = replies

        def recv(self, limit: int) -> bytes:
            return self._replies.pop(0) if self._replies else b""

    first, second = REPLIES["uvicorn json"], REPLIES["no reason phrase, repeated header"]
    reader = ReplyReader(cast(socket.socket, _Turns([first, second])))
    assert (reader.read().status, reader.read().headers) == (200, {"x-a": "2", "content-length": "0"})
    assert not reader.leftover


def test_too_many_headers_is_an_error() -> None:
    raw = b"HTTP/1.1 200 OK\r\n" + b"X-A: 1\r\n" * 101 + b"Content-Length: 0\r\n\r\n"
    with pytest.raises(http.client.HTTPException):
        _as_http_client_reads(raw)
    with pytest.raises(HttpError):
        _as_we_read(raw, 65536)


def test_an_http10_reply_with_only_a_keep_alive_header_closes() -> None:
    """Deliberate difference: llhttp keeps an HTTP/1.0 connection only for `Connection: keep-alive`; http.client
    also for a bare `Keep-Alive` header. Closing is the safe side (one new connection, never a lost reply)."""
    raw = b"HTTP/1.0 200 OK\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\n{}"
    assert _as_http_client_reads(raw)[3] is False
    assert _as_we_read(raw, 7) == (200, {"keep-alive": "timeout=5", "content-length": "2"}, b"{}", True)
