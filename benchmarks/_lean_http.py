"""One keep-alive HTTP/1.1 connection on a plain socket, as an httpx transport, for the benchmarks' clients.

A hop is one POST and its reply; on loopback httpx's default transport spent
about 1 ms of CPU on it (h11's validation, httpcore's pool), three times what
`http.client` takes for the same exchange, and `http.client` still spent most
of its CPU per hop in `putheader` and the `email` header parser. `_http1`
writes the same bytes and reads replies with httptools (llhttp) at a fraction
of that. A benchmark whose clients share the machine with the fleet it
measures (`hop_cost`) gives its `mrtr_client.Client` an `httpx.Client` over
`LeanTransport`, so the client's share of the CPU stays small; the client
library itself only ever speaks through httpx.

Failures keep httpx's meaning for the MRTR loop: a connection that cannot be
made, a send or a read that fails, or a timeout is an `httpx.TransportError`
(the loop resends with the last state). Like httpcore, an idle connection the
server has closed is noticed before reuse (its socket reads as ready) and
replaced, so a keep-alive timeout never costs a round.

The request goes out in one write, head and body together (`http.client`
writes them separately, which cost the receiving side two reads and two
parser passes), with the bytes `http.client` would send.
"""

from __future__ import annotations

import select
import socket
import urllib.request
from collections.abc import Mapping
from contextlib import suppress
from urllib.parse import urlsplit

import httpx

from benchmarks._http1 import HttpError, ReplyReader, RequestHead, host_header, request_line_ok


class TransportError(Exception):
    """The request was not delivered, or no complete answer came back."""


def usable_for(url: str) -> bool:
    """Plain http with no proxy from the environment: what this connection can serve as httpx would."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or not request_line_ok(_target(url)):
        return False
    proxies = urllib.request.getproxies()
    if not ("http" in proxies or "all" in proxies):
        return True
    return bool(urllib.request.proxy_bypass(parts.hostname))


class LeanConnection:
    """POSTs to one URL over one reused connection (not thread-safe: one per client, as the client is)."""

    def __init__(self, url: str, *, connect_timeout: float | None, read_timeout: float | None) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None
        self._host, self._port = parts.hostname, parts.port or 80
        self._head = RequestHead(_target(url), host_header(self._host, self._port))
        self._connect_timeout, self._read_timeout = connect_timeout, read_timeout
        self._sock: socket.socket | None = None
        self._reader: ReplyReader | None = None
        self._timeout: float | None = None
        """The socket's current timeout: set again only when a request asks for another."""

    def post(
        self, body: bytes, headers: Mapping[str, str], timeout: float | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """Status, lower-cased headers and body of the reply; raises `TransportError` (a bad header: `ValueError`)."""
        request = self._head.build(headers, len(body)) + body
        sock, reader = self._connection()
        try:
            wanted = self._read_timeout if timeout is None else timeout
            if wanted != self._timeout:
                sock.settimeout(wanted)
                self._timeout = wanted
            sock.sendall(request)
            reply = reader.read()
        except (OSError, HttpError) as exc:
            self.close()
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        except BaseException:  # an interrupt mid-exchange: the reply may still come, so never reuse this connection
            self.close()
            raise
        if reply.will_close or reader.leftover:
            self.close()
        return reply.status, reply.headers, reply.body

    def _connection(self) -> tuple[socket.socket, ReplyReader]:
        if self._sock is not None and self._reader is not None and not _readable(self._sock):
            return self._sock, self._reader
        self.close()
        try:
            sock = socket.create_connection((self._host, self._port), self._connect_timeout)
        except OSError as exc:
            raise TransportError(f"ConnectError: {exc}") from exc
        with suppress(OSError):  # as http.client: no delayed small writes
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock, self._reader, self._timeout = sock, ReplyReader(sock), self._connect_timeout
        return sock, self._reader

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = self._reader = None


def _target(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _readable(sock: socket.socket) -> bool:
    """An idle keep-alive socket that reads as ready was closed (or spoke out of turn): do not reuse it."""
    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)


class LeanTransport(httpx.BaseTransport):
    """An httpx transport that POSTs to one plain-http URL over one `LeanConnection` (one per client, not shared).

    Anything else (another URL, another method, a streamed body) is refused with a clear error rather than
    sent some other way: a benchmark must know what it measures.
    """

    def __init__(self, url: str, *, connect_timeout: float | None = 5.0, read_timeout: float | None = 60.0) -> None:
        if not usable_for(url):
            raise ValueError(f"LeanTransport serves plain http with no proxy from the environment, not {url!r}")
        self._url = httpx.URL(url)
        self._connection = LeanConnection(url, connect_timeout=connect_timeout, read_timeout=read_timeout)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or request.url != self._url:
            wanted = f"{request.method} {request.url}"
            raise httpx.UnsupportedProtocol(f"LeanTransport only POSTs to {self._url}, not {wanted}")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _SET_BY_THE_CONNECTION}
        read = request.extensions.get("timeout", {}).get("read")
        try:
            status, reply_headers, body = self._connection.post(request.read(), headers, read)
        except TransportError as exc:
            raise httpx.TransportError(str(exc), request=request) from exc
        return httpx.Response(status, headers=reply_headers, content=body, request=request)

    def close(self) -> None:
        self._connection.close()


_SET_BY_THE_CONNECTION = frozenset({"host", "content-length", "accept-encoding", "connection"})
"""Headers httpx sets on every request that the connection writes itself (as `http.client` would): no compression
asked for, keep-alive by HTTP/1.1's default."""
