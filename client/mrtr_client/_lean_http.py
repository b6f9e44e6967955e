"""One keep-alive HTTP/1.1 connection on the standard library, for the sync client's rounds.

A hop is one POST and its reply; on loopback httpx spent about 1 ms of CPU on
it (building the request through its client layers, cookies, auth and redirect
hooks, h11's validation), three times what `http.client` takes for the same
exchange. The sync `Client` uses this for its rounds when it owns its HTTP
client and the URL is plain `http` with no proxy configured in the environment;
anything else (https, a proxy, a caller's own `httpx.Client`, event streams
that stay open) keeps httpx.

Failures keep httpx's meaning for the MRTR loop: a connection that cannot be
made, a send or a read that fails, or a timeout is a `TransportError` (the loop
resends with the last state). Like httpcore, an idle connection the server has
closed is noticed before reuse (its socket reads as ready) and replaced, so a
keep-alive timeout never costs a round.

The request goes out in one write, head and body together: `http.client`
writes them separately, so every round cost the receiving side (the proxy,
then a worker) two reads and two parser passes, and the client two syscalls.
The bytes on the wire are the same.
"""

from __future__ import annotations

import http.client
import select
import socket
import urllib.request
from collections.abc import Mapping
from urllib.parse import urlsplit


class TransportError(Exception):
    """The request was not delivered, or no complete answer came back."""


def usable_for(url: str) -> bool:
    """Plain http with no proxy from the environment: what this connection can serve as httpx would."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    proxies = urllib.request.getproxies()
    if not ("http" in proxies or "all" in proxies):
        return True
    return bool(urllib.request.proxy_bypass(parts.hostname))


class _OneWrite(http.client.HTTPConnection):
    """`http.client`'s connection with the head and a bytes body sent in one `sendall` (same bytes, same checks)."""

    def _send_output(self, message_body: object = None, encode_chunked: bool = False) -> None:
        if not isinstance(message_body, bytes) or encode_chunked:
            super()._send_output(message_body, encode_chunked)  # type: ignore[misc]  # private in typeshed
            return
        self._buffer.extend((b"", b""))  # type: ignore[attr-defined]  # http.client's own head buffer
        head = b"\r\n".join(self._buffer)  # type: ignore[attr-defined]
        del self._buffer[:]  # type: ignore[attr-defined]
        self.send(head + message_body)


class LeanConnection:
    """POSTs to one URL over one reused connection (not thread-safe: one per client, as the client is)."""

    def __init__(self, url: str, *, connect_timeout: float | None, read_timeout: float | None) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None
        self._host, self._port = parts.hostname, parts.port or 80
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._connect_timeout, self._read_timeout = connect_timeout, read_timeout
        self._conn: http.client.HTTPConnection | None = None

    def post(
        self, body: bytes, headers: Mapping[str, str], timeout: float | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """Status, lower-cased headers and body of the reply; raises `TransportError`."""
        conn = self._connection()
        try:
            assert conn.sock is not None
            conn.sock.settimeout(self._read_timeout if timeout is None else timeout)
            conn.request("POST", self._target, body=body, headers=dict(headers))
            response = conn.getresponse()
            content = response.read()
            reply_headers = {key.lower(): value for key, value in response.getheaders()}
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        except BaseException:  # an interrupt mid-exchange: the reply may still come, so never reuse this connection
            self.close()
            raise
        if response.will_close:
            self.close()
        return response.status, reply_headers, content

    def _connection(self) -> http.client.HTTPConnection:
        conn = self._conn
        if conn is not None and conn.sock is not None and not _readable(conn.sock):
            return conn
        self.close()
        conn = _OneWrite(self._host, self._port, timeout=self._connect_timeout)
        try:
            conn.connect()  # with TCP_NODELAY, as http.client sets it
        except OSError as exc:
            conn.close()
            raise TransportError(f"ConnectError: {exc}") from exc
        self._conn = conn
        return conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _readable(sock: socket.socket) -> bool:
    """An idle keep-alive socket that reads as ready was closed (or spoke out of turn): do not reuse it."""
    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)
