"""Why a round ended: the vendor hint on every `input_required` result, and the names the fleet uses.

A worker ends a round without a final result for one of six reasons: it asks
the user something (`input`), or it hands the computation back with no
questions (`admission`, `pressure`, `slice`, `drain`, `straggler`). The reason travels in
`_meta[ROUND_META_KEY]` with the hop count and a retry hint; clients that do
not know the key still work.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

ROUND_META_KEY = "mrtr-cluster.dev/round"
"""Vendor `_meta` key on every input_required result: `{"reason", "hops", "retryAfterMs"?}`."""


class EndOfRound(StrEnum):
    """Why a round ended without a complete result."""

    INPUT = "input"
    ADMISSION = "admission"
    PRESSURE = "pressure"
    SLICE = "slice"
    DRAIN = "drain"
    STRAGGLER = "straggler"
    """This instance ran the request's steps well below the rate it saw elsewhere: move on (retry at once)."""


HAND_BACK_REASONS: tuple[EndOfRound, ...] = (
    EndOfRound.ADMISSION,
    EndOfRound.PRESSURE,
    EndOfRound.SLICE,
    EndOfRound.DRAIN,
    EndOfRound.STRAGGLER,
)
"""The reasons a worker hands a computation back with no questions (load shedding, drain, time slice, straggler)."""

COMPLETE = "complete"
"""How a trace names a round that ended with the final result."""
TRANSPORT = "transport"
"""How a trace names a request that was not delivered or not answered and was sent again."""
ERROR = "error"
"""How a trace names a round that ended with a JSON-RPC error."""
BUSY = "busy"
"""How a trace names a round the server refused as busy (`mrtr_protocol.busy`): sent again after its hint."""

RETRYABLE_STATUSES = frozenset({502, 503, 504})
"""HTTP statuses after which the request was not processed, so the same state may be sent again."""


def round_hint(result: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The fleet's hint on an input_required result, if it carries one."""
    meta = result.get("_meta")
    hint = meta.get(ROUND_META_KEY) if isinstance(meta, Mapping) else None
    return hint if isinstance(hint, Mapping) else None


def end_reason(result: Mapping[str, Any]) -> str:
    """Why the round that produced `result` ended: `complete`, or the hint's reason (`input` without one)."""
    if result.get("resultType", COMPLETE) != "input_required":
        return COMPLETE
    hint = round_hint(result)
    return str(hint.get("reason", EndOfRound.INPUT)) if hint is not None else EndOfRound.INPUT.value
