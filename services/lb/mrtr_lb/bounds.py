"""What one client connection may make the proxy hold, and for how long (both listeners).

The defaults are the field's: HAProxy's ``timeout http-request`` (10 s for a
request's head), nginx's ``large_client_header_buffers 4 8k`` (32 KiB of
head), HAProxy's ``tune.http.maxhdr`` (about 100 header lines), Apache
``mod_reqtimeout``'s body rule (20 s, then at least 500 bytes a second), a
75 s keep-alive, nginx's ``send_timeout`` (60 s for a client that reads
nothing) and a cap on open connections. A head is measured as it
arrives, so one that will never fit is refused before it is buffered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mrtr_lb.config import Settings

TERMINATOR = b"\r\n\r\n"
LINGER = 2.0
"""Seconds a refused connection is read (and the bytes dropped) after its answer, before it is closed:
closing with unread bytes would reset the connection and could destroy the answer at the client."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds of one listener, from :class:`Settings`."""

    max_body: int
    max_head: int
    max_headers: int
    head_timeout: float
    body_timeout: float
    body_min_rate: int
    send_timeout: float
    keepalive_timeout: float
    max_connections: int

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(
            max_body=settings.max_body_size,
            max_head=settings.max_head_size,
            max_headers=settings.max_headers,
            head_timeout=settings.head_timeout,
            body_timeout=settings.body_timeout,
            body_min_rate=settings.body_min_rate,
            send_timeout=settings.send_timeout,
            keepalive_timeout=settings.keepalive_timeout,
            max_connections=settings.max_connections,
        )

    def body_deadline(self, since: float, received: int) -> float:
        """When a body begun at ``since`` is too slow, having brought ``received`` bytes so far."""
        extra = received / self.body_min_rate if self.body_min_rate else 0.0
        return since + self.body_timeout + extra

    def head_too_large(self) -> str:
        return f"request head larger than {self.max_head} bytes"

    def too_many_headers(self) -> str:
        return f"more than {self.max_headers} header lines"

    def head_too_slow(self) -> str:
        return f"request head not complete within {self.head_timeout:g} s"

    def body_too_slow(self) -> str:
        rate = f", then {self.body_min_rate} bytes/s" if self.body_min_rate else ""
        return f"request body too slow (allowed: {self.body_timeout:g} s{rate})"


TOO_MANY_CONNECTIONS = "too many open connections; retry later"


def head_bytes_in(data: bytes, tail: bytes) -> int:
    """How many bytes of ``data`` belong to the head being read: through its blank line, or all of them.

    ``tail`` is the end (up to three bytes) of what came before, so a blank line split across two
    reads is found. The parser ends a head only on CRLF CRLF (it refuses bare LF).
    """
    if tail:
        at = (tail + data[:3]).find(TERMINATOR)
        if at != -1:
            return at + 4 - len(tail)
    at = data.find(TERMINATOR)
    return len(data) if at == -1 else at + 4
