"""HTTP/1.1 framing for the lean connection: the request head `http.client` would send, and a reply read off a socket.

`http.client` costs the client most of its CPU per hop: every header goes
through `putheader`'s checks one call at a time, and every reply's headers
through the `email` package's parser. This module does the same exchange
with a few bytes operations and keeps `http.client`'s rules, so nothing
changes on the wire or in what a reply means:

* the request head is byte for byte what `http.client` writes for a POST
  (request line, `Host` unless given, `Accept-Encoding: identity` unless
  given, `Content-Length` unless a length or a transfer coding is given, then
  the caller's headers in order), with its checks on header names and values;
* a reply is framed as `http.client` frames it: `100 Continue` skipped, no
  body for 1xx, 204 and 304, `Transfer-Encoding: chunked`, else
  `Content-Length`, else the body runs to the end of the connection; the
  connection is kept alive or not by the same version and `Connection` rules.

Anything malformed is an `HttpError` (the caller's transport error).
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

MAX_HEAD = 65536 * 2
"""Bytes a reply's status line and headers may take (`http.client` allows 100 lines of 64 KiB)."""
MAX_HEADERS = 100
"""As `http.client`'s `_MAXHEADERS`."""
_RESERVED = frozenset({"host", "accept-encoding", "content-length", "transfer-encoding"})
_LEGAL_NAME = re.compile(rb"[^:\s][^:\r\n]*").fullmatch
_ILLEGAL_VALUE = re.compile(rb"\n(?![ \t])|\r(?![ \t\n])").search
_HEAD_END = re.compile(rb"\r?\n\r?\n")
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
    """Reads one reply at a time from a connected socket; bytes past a reply mean the connection cannot be reused."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = bytearray()

    @property
    def leftover(self) -> bool:
        """Bytes arrived beyond the last reply: the server spoke out of turn."""
        return bool(self._buffer)

    def read(self) -> Reply:
        while True:
            status, version, headers = self._head()
            if status != 100:
                break
        will_close = _will_close(version, headers)
        if status < 200 or status in (204, 304):
            return Reply(status, headers, b"", will_close)
        if headers.get("transfer-encoding", "").lower() == "chunked":
            return Reply(status, headers, self._chunked(), will_close)
        length = _content_length(headers)
        if length is None:
            return Reply(status, headers, self._to_end(), True)
        return Reply(status, headers, self._exactly(length), will_close)

    def _fill(self) -> None:
        data = self._sock.recv(65536)
        if not data:
            raise HttpError("the server closed the connection before the reply was complete")
        self._buffer += data

    def _head(self) -> tuple[int, int, dict[str, str]]:
        searched = 0
        while True:
            end = _head_end(self._buffer, max(0, searched - 3))
            if end is not None:
                break
            if len(self._buffer) > MAX_HEAD:
                raise HttpError("reply head too long")
            searched = len(self._buffer)
            if not self._buffer:
                data = self._sock.recv(65536)
                if not data:
                    raise HttpError("Remote end closed connection without response")
                self._buffer += data
            else:
                self._fill()
        start, stop, crlf = end
        text = self._buffer[:start].decode("iso-8859-1")
        del self._buffer[:stop]
        status_line, *lines = text.split("\r\n") if crlf else [line.rstrip("\r") for line in text.split("\n")]
        status, version = _status(status_line)
        return status, version, _headers(lines)

    def _exactly(self, length: int) -> bytes:
        while len(self._buffer) < length:
            self._fill()
        body = bytes(self._buffer[:length])
        del self._buffer[:length]
        return body

    def _line(self) -> bytes:
        while (end := self._buffer.find(b"\n")) < 0:
            if len(self._buffer) > 65536:
                raise HttpError("chunk line too long")
            self._fill()
        line = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        return line

    def _chunked(self) -> bytes:
        parts = []
        while True:
            size_text = self._line().split(b";", 1)[0]
            try:
                size = int(size_text, 16)
            except ValueError:
                raise HttpError(f"bad chunk size {size_text!r}") from None
            if size < 0:
                raise HttpError(f"bad chunk size {size_text!r}")
            if size == 0:
                break
            parts.append(self._exactly(size))
            self._exactly(2)  # the CRLF after the chunk's data
        while self._line() not in (b"\r\n", b"\n"):  # trailer fields, ignored as http.client does
            pass
        return b"".join(parts)

    def _to_end(self) -> bytes:
        while data := self._sock.recv(65536):
            self._buffer += data
        body = bytes(self._buffer)
        self._buffer.clear()
        return body


def _head_end(buffer: bytearray, start: int) -> tuple[int, int, bool] | None:
    """Where the blank line ending a head starts and stops, and whether every line before it ends in CRLF.

    The usual head (CRLF throughout) is found with two scans in C; bare line feeds, which `http.client`
    accepts too, take the regular expression.
    """
    end = buffer.find(b"\r\n\r\n", start)
    if end >= 0 and buffer.count(b"\n", 0, end) == buffer.count(b"\r\n", 0, end):
        return end, end + 4, True
    found = _HEAD_END.search(buffer, start)
    return (found.start(), found.end(), False) if found else None


def _status(line: str) -> tuple[int, int]:
    """Status code and version (10 or 11) of a status line, as `http.client` reads it."""
    code = line[9:12]
    usual = line.startswith("HTTP/1.1 ") and code.isascii() and code.isdigit() and line[12:13] in ("", " ")
    if usual and int(code) >= 100:
        return int(code), 11
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise HttpError(f"bad status line {line[:80]!r}")
    version_text, code = parts[0], parts[1]
    if version_text in ("HTTP/1.0", "HTTP/0.9"):
        version = 10
    elif version_text.startswith("HTTP/1."):
        version = 11
    else:
        raise HttpError(f"unknown protocol {version_text[:20]!r}")
    if len(code) != 3 or not (code.isascii() and code.isdigit()) or not 100 <= int(code) <= 999:
        raise HttpError(f"bad status line {line[:80]!r}")
    return int(code), version


def _headers(lines: list[str]) -> dict[str, str]:
    """Lower-cased header names to values (leading blanks dropped; a folded line joins its header with a space)."""
    if len(lines) > MAX_HEADERS:
        raise HttpError(f"got more than {MAX_HEADERS} headers")
    headers: dict[str, str] = {}
    name = ""
    for line in lines:
        field, colon, value = line.partition(":")
        if colon and field and not field[0].isspace() and not field[-1].isspace():
            name = field.lower()
            headers[name] = value.lstrip(" \t")
        elif name and line[:1] in (" ", "\t"):
            headers[name] += " " + line.strip()
        else:
            raise HttpError(f"bad header line {line[:80]!r}")
    return headers


def _content_length(headers: Mapping[str, str]) -> int | None:
    value = headers.get("content-length")
    if value is None:
        return None
    try:
        length = int(value)
    except ValueError:
        return None
    return length if length >= 0 else None


def _will_close(version: int, headers: Mapping[str, str]) -> bool:
    """`http.client`'s rule: HTTP/1.1 stays open unless `Connection: close`; HTTP/1.0 only with keep-alive."""
    connection = headers.get("connection", "").lower()
    if version == 11:
        return "close" in connection
    if headers.get("keep-alive") or "keep-alive" in connection:
        return False
    return "keep-alive" not in headers.get("proxy-connection", "").lower()
