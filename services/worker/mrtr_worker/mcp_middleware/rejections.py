"""Turn the SDK's requestState rejections into a metric.

The SDK answers every bad state with one frozen wire error and writes the
precise reason only to its log (`requestState rejected on <method>: <reason>`).
A logging handler on that logger is the one place all reasons pass, codec
and envelope alike, so counting there needs no fork of the SDK.
"""

from __future__ import annotations

import logging

from prometheus_client import Counter

SDK_LOGGER = "mcp.server.request_state"
_REJECTED_PREFIX = "requestState rejected on"

REASON_LABELS = {
    "malformed": "malformed",
    "seal": "tampered",
    "unknown key": "unknown_key",
    "oversized": "oversized",
    "expired": "expired",
    "minted in the future": "future",
    "request binding": "foreign_request",
    "audience": "foreign_audience",
    "principal": "foreign_principal",
    "principal drift": "foreign_principal",
    "non-string requestState": "malformed",
}


class RejectionCounter(logging.Handler):
    """Counts each rejection under a short, bounded reason label."""

    def __init__(self, counter: Counter) -> None:
        super().__init__(level=logging.WARNING)
        self._counter = counter

    def emit(self, record: logging.LogRecord) -> None:
        if not str(record.msg).startswith(_REJECTED_PREFIX):
            return
        args = record.args if isinstance(record.args, tuple) else ()
        reason = str(args[-1]) if args else "unknown"
        self._counter.labels(reason=REASON_LABELS.get(reason, "other")).inc()


def install(counter: Counter) -> RejectionCounter:
    """Attach a counter to the SDK's logger; returns the handler so it can be removed."""
    handler = RejectionCounter(counter)
    logging.getLogger(SDK_LOGGER).addHandler(handler)
    return handler
