"""A worker's "busy: come back later" answer, which a client can act on.

When the whole fleet is full, queueing a new call for longer than its caller will wait loses it: the
caller gives up, and the slot time spent on it is wasted. A worker refuses such a call at once instead,
before running anything: the JSON-RPC error `SERVER_BUSY` (-32000, in the range the spec leaves to
implementations) with `data.retryAfterMs`, how long to wait before sending the call again. Nothing ran,
so nothing is lost; a client that ignores the hint and sends it again at once is refused again or
served, never answered wrongly. The listener uses the same code for a connection it cannot take.
"""

from __future__ import annotations

from typing import Any

SERVER_BUSY = -32000
"""JSON-RPC's implementation-defined server error: the request was fine, the worker (or the fleet) is full."""
RETRY_AFTER_KEY = "retryAfterMs"
"""In a busy error's `data` (and in the fleet's round hint): milliseconds to wait before sending again."""


def busy_retry_after_ms(code: int, data: Any) -> float | None:
    """The retry hint of a busy refusal, in milliseconds; None if the error is not one (or carries no hint)."""
    if code != SERVER_BUSY or not isinstance(data, dict):
        return None
    hint = data.get(RETRY_AFTER_KEY)
    if isinstance(hint, bool) or not isinstance(hint, int | float) or hint < 0:
        return None
    return float(hint)
