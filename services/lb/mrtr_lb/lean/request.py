"""The request bytes the lean engine writes to a backend: end-to-end headers, X-Forwarded-*, a recomputed length.

The header rules are :mod:`mrtr_lb.rules`'; the header
block built for one request is kept on the client connection and reused while
the connection's requests repeat their headers.
"""

from __future__ import annotations

from mrtr_lb.backends import Backend
from mrtr_lb.lean.blocks import HeaderBlock
from mrtr_lb.lean.http import ClientConnection, LeanRequest
from mrtr_lb.lean.upstream import connection_tokens
from mrtr_lb.rules import BODY_METHODS, REQUEST_DROP

_REQUEST_DROP = frozenset(name.encode() for name in REQUEST_DROP)


_XFF, _XFP, _XFH, _HOST = b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host", b"host"
_REQUEST_SPECIAL = _REQUEST_DROP | {_XFF}


HEAD_CACHE_SIZE = 16
"""Header blocks kept per client connection (a few tools and methods; requests that vary every time miss)."""
HEAD_CACHE_BLOCK = 4096
"""Larger header blocks are built for their request only: what a connection keeps stays small (16 x 4 KiB)."""


def upstream_request(req: LeanRequest, backend: Backend, client: ClientConnection) -> bytes:
    """The request as the backend gets it: end-to-end headers, X-Forwarded-*, a recomputed length.

    A client sends the same headers on most requests of a connection (its length is not among them),
    so the header block built for one is kept on the connection and reused for the next.
    """
    key = (backend.url, tuple(req.headers))
    blocks = client.upstream_heads
    entry = blocks.get(key)
    if entry is None:
        entry = HeaderBlock(backend.url, header_block(req, backend, client.remote))
        if len(blocks) < HEAD_CACHE_SIZE and len(entry.block) <= HEAD_CACHE_BLOCK:
            blocks[key] = entry
    req.sent_with = entry
    path, query = req.path_and_query
    body = req.body
    length = b"Content-Length: %d\r\n\r\n" % len(body) if body or req.method in BODY_METHODS else b"\r\n"
    target = path + b"?" + query if query else path
    return b"".join((req.method.encode(), b" ", target, b" HTTP/1.1\r\n", entry.block, length, body))


def header_block(req: LeanRequest, backend: Backend, remote: str) -> bytes:
    """The upstream header lines, without the request line and the length: end-to-end headers, X-Forwarded-*."""
    lowered = req.lowered()
    tokens = connection_tokens(req.headers) if b"connection" in lowered else None
    special = _REQUEST_SPECIAL | tokens if tokens else _REQUEST_SPECIAL
    parts: list[bytes] = []
    append = parts.append
    forwarded_for: list[bytes] = []
    for name, value in req.headers:
        lower = name.lower()
        if lower in special:
            if lower == _XFF and not (tokens and _XFF in tokens):
                forwarded_for.append(value)
            continue
        append(b"%s: %s\r\n" % (name, value))
    forwarded_for.append(remote.encode())
    append(b"X-Forwarded-For: %s\r\n" % b", ".join(forwarded_for))
    if _XFP not in lowered or (tokens and _XFP in tokens):
        append(b"X-Forwarded-Proto: http\r\n")
    host = lowered.get(_HOST)
    if host and (_XFH not in lowered or (tokens and _XFH in tokens)):
        append(b"X-Forwarded-Host: %s\r\n" % host)
    if host is None or (tokens and _HOST in tokens):
        append(b"Host: %s\r\n" % backend.url.split("://", 1)[1].encode())
    return b"".join(parts)
