"""HTTP/1.1 framing for the lean connection: the request head `http.client` would send, and a reply read off a socket.

`http.client` costs the client most of its CPU per hop: every header goes
through `putheader`'s checks one call at a time, and every reply's headers
through the `email` package's parser. Here the request head is a few bytes
operations, byte for byte what `http.client` writes for a POST (request line,
`Host` unless given, `Accept-Encoding: identity` unless given,
`Content-Length` unless a length or a transfer coding is given, then the
caller's headers in order), with its checks on header names and values.

Replies are read by `httptools` (llhttp, the C parser made for the job that
uvicorn and Node use) fed from the socket, rather than framing code of our
own: `100 Continue` skipped, no body for 1xx, 204 and 304, chunked, else
`Content-Length`, else the body runs to the end of the connection (the one
rule kept here: httptools has no end-of-stream call), keep-alive by llhttp's
version and `Connection` rules.

Deliberate differences from `http.client`, none of which our workers, proxy
or uvicorn send: llhttp is strict, so bare LF line ends, obsolete header
folding, a non-numeric `Content-Length` and HTTP/2-like status lines are an
`HttpError`; a head cut by the end of the stream is an `HttpError` (not a
reply with an empty body); an HTTP/1.0 reply is kept alive only with
`Connection: keep-alive` (not for a bare `Keep-Alive` header). Anything
malformed is an `HttpError` (the caller's transport error).
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

import httptools

MAX_HEAD = 65536 * 2
"""Bytes read before a reply's head is complete (`http.client` allows 100 lines of 64 KiB)."""
MAX_HEADERS = 100
"""As `http.client`'s `_MAXHEADERS`."""
_RESERVED = frozenset({"host", "accept-encoding", "content-length", "transfer-encoding"})
_LEGAL_NAME = re.compile(rb"[^:\s][^:\r\n]*").fullmatch
_ILLEGAL_VALUE = re.compile(rb"\n(?![ \t])|\r(?![ \t\n])").search
_CRLF = b"\r\n"


class HttpError(Exception):
    """The reply could not be read: the peer closed early, or sent something that is not HTTP/1.x."""


def host_header(host: str, port: int) -> str:
    """The `Host` value `http.client` sends: the port only when not 80, an IPv6 address in brackets.

    `host` is the URL's host without brackets, as `urlsplit(...).hostname` gives it.
    """
    try:
        encoded = host.encode("ascii").decode("ascii")
    except UnicodeEncodeError:
        encoded = host.encode("idna").decode("ascii")
    if ":" in encoded:
        encoded = f"[{encoded}]"
    return encoded if port == 80 else f"{encoded}:{port}"


def request_line_ok(target: str) -> bool:
    """False for a target `http.client` would refuse (control characters or spaces)."""
    return not re.search("[\x00-\x20\x7f]", target)


class RequestHead:
    """Builds POST heads for one target; the headers' encoding is kept while they do not change (as between rounds)."""

    def __init__(self, target: str, host: str) -> None:
        self._start = f"POST {target} HTTP/1.1\r\n".encode("ascii")
        self._host = f"Host: {host}\r\n".encode("ascii")
        self._key: tuple[tuple[str, str], ...] | None = None
        self._encoded: tuple[bytes, bytes, bool] = (b"", b"", True)

    def build(self, headers: Mapping[str, str], body_length: int) -> bytes:
        """The head (ending in the blank line) for a body of `body_length` bytes."""
        key = tuple(headers.items())
        if key != self._key:
            self._encoded = self._encode(key)
            self._key = key
        before, after, with_length = self._encoded
        if with_length:
            return b"%sContent-Length: %d\r\n%s" % (before, body_length, after)
        return before + after

    def _encode(self, items: tuple[tuple[str, str], ...]) -> tuple[bytes, bytes, bool]:
        names = {name.lower() for name, _ in items}
        before = self._start
        if "host" not in names:
            before += self._host
        if "accept-encoding" not in names:
            before += b"Accept-Encoding: identity\r\n"
        with_length = not names & {"content-length", "transfer-encoding"}
        lines = [_header_line(name, value) for name, value in items]
        return before, b"".join(lines) + _CRLF, with_length


def _header_line(name: str, value: str) -> bytes:
    """One header as `http.client.putheader` writes it, with its checks (a `ValueError` when illegal)."""
    raw_name = name.encode("ascii")
    if not _LEGAL_NAME(raw_name):
        raise ValueError(f"Invalid header name {raw_name!r}")
    raw_value = value.encode("latin-1") if isinstance(value, str) else str(value).encode("ascii")
    if _ILLEGAL_VALUE(raw_value):
        raise ValueError(f"Invalid header value {raw_value!r}")
    return raw_name + b": " + raw_value + _CRLF


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    """Lower-cased names; the last of repeated headers wins."""
    body: bytes
    will_close: bool
    """The server will close the connection (or did): do not send another request on it."""


class ReplyReader:
    """Reads one reply at a time from a connected socket, through llhttp; bytes past a reply spoil the connection."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._parser = httptools.HttpResponseParser(self)
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._head_size = 0
        self._head_done = False
        self._reply: Reply | None = None
        self._begun = self._status = self._header_count = 0

    @property
    def leftover(self) -> bool:
        """Bytes arrived beyond the last reply (a next message begun): the server spoke out of turn."""
        return self._begun > 0

    def read(self) -> Reply:
        self._begun = 0
        self._reply = None
        self._start()
        while self._reply is None:
            data = self._sock.recv(65536)
            if not data:
                return self._at_end()
            if not self._head_done:
                self._head_size += len(data)
                if self._head_size > MAX_HEAD:
                    raise HttpError("reply head too long")
            try:
                self._parser.feed_data(data)
            except httptools.HttpParserUpgrade:  # a 101 with Upgrade: what follows is not HTTP
                self._begun += 1
            except httptools.HttpParserError as exc:
                if self._reply is None:
                    raise HttpError(f"bad reply: {exc}") from None
                self._begun += 1  # the reply was whole; what followed it was not a reply
        return self._reply

    def _start(self) -> None:
        self._headers, self._body, self._header_count = {}, [], 0
        self._head_size, self._head_done = 0, False

    def _at_end(self) -> Reply:
        """The server closed: a body without length or chunking ends here (as `http.client` reads it)."""
        if not self._head_done or self._status == 100:
            raise HttpError("the server closed the connection before the reply head was complete")
        if "content-length" in self._headers or "chunked" in self._headers.get("transfer-encoding", "").lower():
            raise HttpError("the server closed the connection before the reply was complete")
        return Reply(self._status, self._headers, b"".join(self._body), True)

    # llhttp's callbacks (httptools calls them by name)

    def on_message_begin(self) -> None:
        if self._reply is not None:
            self._begun += 1
        else:
            self._start()

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._head_done:  # trailer fields, ignored as `http.client` ignores them; or a next reply's
            return
        self._header_count += 1
        if self._header_count > MAX_HEADERS:
            raise HttpError(f"got more than {MAX_HEADERS} headers")
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self._head_done = True
        self._status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._status == 100:  # `100 Continue` is skipped, as `http.client` skips it
            return
        if self._reply is None:
            keep_alive = self._parser.should_keep_alive()  # llhttp resets it once this callback returns
            self._reply = Reply(self._status, self._headers, b"".join(self._body), not keep_alive)
