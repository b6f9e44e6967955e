"""The upstream header block a client connection keeps for reuse, and what else it determines.

Its own module (no imports) because both the client connection
(:mod:`mrtr_lb.lean.http`, which keeps the blocks) and the request builder
(:mod:`mrtr_lb.lean.request`, which makes them) name it.
"""

from __future__ import annotations


class HeaderBlock:
    """The upstream header lines built for one (backend, request headers) and what else they determine.

    Kept on the client connection: the access-log line's start (method, path, MCP fields, backend) is
    made from it once and reused while the method and path repeat, so a line costs no header lookup.
    """

    __slots__ = ("backend", "block", "log_head", "log_method", "log_path")

    def __init__(self, backend: str, block: bytes) -> None:
        self.backend = backend
        self.block = block
        self.log_head = ""
        self.log_method: str | None = None
        self.log_path: str | None = None
