"""The benchmarks' lean connection and its httpx transport: replies, stale keep-alive connections, failures."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from benchmarks._lean_http import LeanConnection, LeanTransport, TransportError, usable_for

REPLY = b'{"ok":1}'


class ClosingServer:
    """Answers each request on a fresh connection, then closes it without saying so (a keep-alive timeout)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.closed = threading.Event()
        self.connections = 0
        self.requests: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(
                    next(
                        v
                        for k, _, v in (h.partition(b":") for h in head.split(b"\r\n"))
                        if k.lower() == b"content-length"
                    )
                )
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests.append(body)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Worker-Id: s1\r\n"
                    + f"Content-Length: {len(REPLY)}\r\n\r\n".encode()
                    + REPLY
                )
            self.closed.set()


@pytest.fixture
def server() -> Iterator[ClosingServer]:
    s = ClosingServer()
    yield s
    s.sock.close()


def test_a_silently_closed_keep_alive_connection_is_replaced_not_failed(server: ClosingServer) -> None:
    lean = LeanConnection(f"http://127.0.0.1:{server.port}/mcp", connect_timeout=5, read_timeout=5)
    status, headers, body = lean.post(b'{"a":1}', {"Content-Type": "application/json"})
    assert (status, headers["content-type"], headers["x-worker-id"], body) == (200, "application/json", "s1", REPLY)
    assert server.closed.wait(5)
    status, _, body = lean.post(b'{"a":2}', {"Content-Type": "application/json"})
    assert (status, body) == (200, REPLY)
    assert server.requests == [b'{"a":1}', b'{"a":2}']
    assert server.connections == 2
    lean.close()


def test_an_unreachable_server_is_a_transport_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    lean = LeanConnection(f"http://127.0.0.1:{port}/mcp", connect_timeout=5, read_timeout=5)
    with pytest.raises(TransportError):
        lean.post(b"{}", {})


def test_only_plain_http_without_a_proxy_uses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert usable_for("http://127.0.0.1:8080/mcp")
    assert not usable_for("https://example.test/mcp")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.test:3128")
    assert not usable_for("http://example.test/mcp")
    with pytest.raises(ValueError, match="plain http with no proxy"):
        LeanTransport("http://example.test/mcp")
    monkeypatch.setenv("NO_PROXY", "example.test")
    assert usable_for("http://example.test/mcp")


def test_a_client_over_the_transport_gets_each_reply_and_a_lost_server_is_a_transport_error(
    server: ClosingServer,
) -> None:
    """The MRTR loop reads httpx's own errors: a refused connection must arrive as `httpx.TransportError`."""
    url = f"http://127.0.0.1:{server.port}/mcp"
    with httpx.Client(transport=LeanTransport(url)) as http:
        reply = http.post(url, content=b'{"a":1}', headers={"Content-Type": "application/json"})
        assert (reply.status_code, reply.content) == (200, REPLY)
        with pytest.raises(httpx.UnsupportedProtocol, match="only POSTs to"):
            http.get(url)
    assert server.requests == [b'{"a":1}']
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{s.getsockname()[1]}/mcp"
    with httpx.Client(transport=LeanTransport(gone)) as http, pytest.raises(httpx.TransportError, match="ConnectError"):
        http.post(gone, content=b"{}")


def test_an_interrupt_mid_exchange_never_leaves_the_connection_for_reuse(
    server: ClosingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C between sending and reading: the late reply must never be read as the next request's answer."""
    lean = LeanConnection(f"http://127.0.0.1:{server.port}/mcp", connect_timeout=5, read_timeout=5)

    def interrupted(self: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr("benchmarks._http1.ReplyReader.read", interrupted)
        with pytest.raises(KeyboardInterrupt):
            lean.post(b'{"a":1}', {"Content-Type": "application/json"})
    assert lean._sock is None
    status, _, body = lean.post(b'{"a":2}', {"Content-Type": "application/json"})
    assert (status, body) == (200, REPLY)
    assert server.connections == 2
    lean.close()


def test_a_request_goes_out_in_one_write_head_and_body_together(
    server: ClosingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """http.client writes the head and the body apart: two reads and parser passes on the other side."""
    writes: list[bytes] = []
    sendall = socket.socket.sendall

    def recording(self: socket.socket, data: bytes, *args: int) -> None:
        if threading.current_thread() is threading.main_thread():  # the client's, not the server thread's
            writes.append(bytes(data))
        sendall(self, data, *args)

    monkeypatch.setattr(socket.socket, "sendall", recording)
    lean = LeanConnection(f"http://127.0.0.1:{server.port}/mcp", connect_timeout=5, read_timeout=5)
    status, _, body = lean.post(b'{"a":1}', {"Content-Type": "application/json"})
    assert (status, body) == (200, REPLY)
    assert len(writes) == 1
    head, _, sent_body = writes[0].partition(b"\r\n\r\n")
    assert head.split(b"\r\n") == [
        b"POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{server.port}".encode(),
        b"Accept-Encoding: identity",
        b"Content-Length: 7",
        b"Content-Type: application/json",
    ]
    assert sent_body == b'{"a":1}'
    assert server.requests == [b'{"a":1}']
    lean.close()
