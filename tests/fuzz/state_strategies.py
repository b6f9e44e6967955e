"""Mutations of a sealed `requestState`, as a client (or anyone on the path) can make them.

Each mutation comes with its family, which says what the worker may call the
rejection (`mrtr_worker_state_rejections_total{reason}`): a flipped bit in
the key id is an unknown key, elsewhere a broken seal; any change to the
text that leaves it non-canonical base64url is malformed; anything over the
size limit is oversized, whatever it contains.
"""

from __future__ import annotations

import base64
import json
import string
from typing import Any

from hypothesis import strategies as st

from mrtr_worker.sealing.layout import StateLayout, Trace
from tests.fuzz.wire_strategies import any_text, json_values

STATE_LIMIT = 64 * 1024
"""The worker's default `MRTR_WORKER_STATE_MAX_BYTES`."""
PREFIX = "v1."
B64URL = string.ascii_letters + string.digits + "-_"

UNREADABLE = frozenset({"malformed", "tampered", "unknown_key"})
REASONS: dict[str, frozenset[str]] = {
    "bit flip": frozenset({"tampered", "unknown_key"}),
    "character flip": UNREADABLE,
    "truncated": UNREADABLE,
    "extended": UNREADABLE,
    "padded": frozenset({"malformed"}),
    "standard alphabet": frozenset({"malformed"}),
    "whitespace": frozenset({"malformed"}),
    "re-encoded": frozenset({"malformed"}),
    "case swapped": UNREADABLE,
    "other prefix": frozenset({"malformed"}),
    "spliced": frozenset({"tampered", "unknown_key", "malformed"}),
    "oversized": frozenset({"oversized"}),
    "garbage at the limit": frozenset({"malformed"}),
}
"""The rejection reasons each mutation family may be counted under."""


def raw(token: str) -> bytes:
    body = token[len(PREFIX) :]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


def encode(data: bytes) -> str:
    return PREFIX + base64.urlsafe_b64encode(data).decode().rstrip("=")


def _index(draw: st.DrawFn, size: int) -> int:
    """A position spread evenly over `size` (hypothesis would otherwise favour the start)."""
    return draw(st.integers(0, 2**32)) % max(size, 1)


@st.composite
def mutated_tokens(draw: st.DrawFn, token: str, other: str) -> tuple[str, str]:
    """(family, mutated token): one change to `token`, never the identity; `other` is another real token."""
    family = draw(st.sampled_from(sorted(REASONS)))
    mutated = _mutate(draw, family, token, other)
    if mutated == token:  # e.g. a standard-alphabet copy of a token without "-" or "_"
        family, mutated = "extended", token + draw(st.sampled_from(B64URL))
    return family, mutated


def _mutate(draw: st.DrawFn, family: str, token: str, other: str) -> str:
    data = raw(token)
    body = token[len(PREFIX) :]
    if family == "bit flip":
        bit = _index(draw, len(data) * 8)
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        return encode(bytes(flipped))
    if family == "character flip":
        at = _index(draw, len(token))
        return token[:at] + chr(ord(token[at]) ^ (1 << draw(st.integers(0, 6)))) + token[at + 1 :]
    if family == "truncated":
        return token[: _index(draw, len(token))]
    if family == "extended":
        tail = draw(st.text(B64URL, min_size=1, max_size=12) | any_text.filter(bool))
        return token + tail
    if family == "padded":
        return token + "=" * draw(st.integers(1, 3))
    if family == "standard alphabet":
        return PREFIX + body.translate(str.maketrans("-_", "+/"))
    if family == "whitespace":
        at = len(PREFIX) + _index(draw, len(body))
        return token[:at] + draw(st.sampled_from([" ", "\n", "\r\n", "\t", "\u00a0"])) + token[at:]
    if family == "re-encoded":
        return PREFIX + base64.b64encode(data).decode()
    if family == "case swapped":
        at = len(PREFIX) + _index(draw, len(body))
        return token[:at] + token[at].swapcase() + token[at + 1 :]
    if family == "other prefix":
        return draw(st.sampled_from(["v2.", "V1.", "", "v1..", "v0.", "v1"])) + body
    if family == "spliced":  # this token's key id and nonce, another token's ciphertext (or the reverse)
        theirs = raw(other)
        cut = 4 + 12
        return encode(data[:cut] + theirs[cut:] if draw(st.booleans()) else theirs[:cut] + data[cut:])
    if family == "oversized":
        size = draw(st.integers(STATE_LIMIT + 1, 900_000))
        return (token + draw(st.sampled_from(["A", "-", "="])) * size)[:size]
    return (draw(st.sampled_from(["A", "v1.", "_"])) * STATE_LIMIT)[:STATE_LIMIT]  # garbage, exactly at the limit


@st.composite
def changed_layouts(draw: st.DrawFn, data: st.SearchStrategy[dict[str, Any]], traces: st.SearchStrategy[Trace]) -> str:
    """A plaintext layout a worker wrote, with one field replaced, removed or kept: often readable, often not."""
    version, fmt = draw(st.sampled_from([(1, 1), (2, 1), (2, 2)]))
    doc = json.loads(StateLayout(version, fmt).encode(draw(data), draw(traces), {}))
    field = draw(st.sampled_from(["fmt", "data", "hops", "visited", "trace", "sealed_at", "extra"]))
    change = draw(st.sampled_from(["replace", "remove", "keep"]))
    if change == "remove":
        doc.pop(field, None)
    elif change == "replace":
        doc[field] = draw(st.sampled_from([0, 99, "1", 1.0, True, None, [1], {"v": 1}]) | json_values)
    return json.dumps(doc)
