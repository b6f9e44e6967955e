"""Properties of the fleet's state codec and layout, in process (no worker needed for pure functions).

`FleetStateCodec`: every payload round-trips; any single-bit flip, any
truncation and any key ring without the sealing key fail to open; a token
over the size limit is refused before any decoding, and a payload whose
token would exceed it is never sealed. `StateLayout`: what one version
writes, every version that reads the format reads back (unknown fields
carried forward); any other plaintext is "start again", never a crash.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from mcp.server.request_state import InvalidRequestState

from mrtr_worker.sealing.codec import OVERSIZED, FleetStateCodec
from mrtr_worker.sealing.keyring import MIN_KEY_BYTES, KeyRing
from mrtr_worker.sealing.layout import READABLE_FORMATS, StateLayout, Trace, UnreadableState
from tests.fuzz.budget import budget
from tests.fuzz.state_strategies import changed_layouts
from tests.fuzz.tally import TALLY
from tests.fuzz.wire_strategies import any_text, json_values

LIMIT = 64 * 1024

secrets = st.binary(min_size=MIN_KEY_BYTES, max_size=64)
key_names = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)


@st.composite
def rings(draw: st.DrawFn) -> KeyRing:
    """A ring of one to three distinct keys, any of them primary."""
    keys = draw(st.dictionaries(key_names, secrets, min_size=1, max_size=3))
    assume(len(set(keys.values())) == len(keys))
    return KeyRing(primary=draw(st.sampled_from(sorted(keys))), keys=keys)


payloads = st.binary(max_size=2048) | json_values.map(lambda v: json.dumps(v).encode())


def _codec(ring: KeyRing, seen: list[tuple[str, str]] | None = None) -> FleetStateCodec:
    observe = (lambda op, key: seen.append((op, key))) if seen is not None else None
    return FleetStateCodec(ring, max_token_bytes=LIMIT, observe=observe)


def _raw(token: str) -> bytes:
    body = token[len("v1.") :]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


def _token(raw: bytes) -> str:
    return "v1." + base64.urlsafe_b64encode(raw).decode().rstrip("=")


@settings(max_examples=budget(200))
@given(ring=rings(), payload=payloads)
def test_every_payload_round_trips_and_names_its_key(ring: KeyRing, payload: bytes) -> None:
    seen: list[tuple[str, str]] = []
    codec = _codec(ring, seen)
    token = codec.seal(payload)
    assert token.startswith("v1.")
    assert codec.unseal(token) == payload
    assert seen == [("sealed", ring.primary), ("opened", ring.primary)]
    TALLY.case("round trip")


@settings(max_examples=budget(300))
@given(ring=rings(), payload=payloads, data=st.data())
def test_any_single_bit_flip_fails_to_open(ring: KeyRing, payload: bytes, data: st.DataObject) -> None:
    codec = _codec(ring)
    token = codec.seal(payload)
    if data.draw(st.booleans(), label="flip the bytes, else a character"):
        raw = bytearray(_raw(token))
        bit = data.draw(st.integers(0, 2**32), label="bit") % (len(raw) * 8)  # uniform, not biased to the start
        raw[bit // 8] ^= 1 << (bit % 8)
        flipped = _token(bytes(raw))
        where = "kid" if bit < 32 else "nonce" if bit < 128 else "sealed"
    else:
        in_prefix = data.draw(st.integers(0, 9), label="region") == 7  # the "v1." prefix one time in ten
        at = data.draw(st.integers(0, 2**32), label="at") % (3 if in_prefix else len(token) - 3)
        at += 0 if in_prefix else 3
        bit = data.draw(st.integers(0, 6), label="bit")
        flipped = token[:at] + chr(ord(token[at]) ^ (1 << bit)) + token[at + 1 :]
        where = "prefix" if at < 3 else "text"
    assert flipped != token
    with pytest.raises(InvalidRequestState):
        codec.unseal(flipped)
    TALLY.case(f"flip in {where}")


@settings(max_examples=budget(200))
@given(ring=rings(), payload=payloads, data=st.data())
def test_any_truncation_or_extension_fails_to_open(ring: KeyRing, payload: bytes, data: st.DataObject) -> None:
    codec = _codec(ring)
    token = codec.seal(payload)
    if data.draw(st.booleans(), label="truncate, else extend"):
        changed = token[: data.draw(st.integers(0, 2**32), label="keep") % len(token)]
        kind = "truncated"
    else:
        changed = token + data.draw(st.text("ABCxyz019-_=+/ \n.", min_size=1, max_size=8) | any_text.filter(bool))
        kind = "extended"
    with pytest.raises(InvalidRequestState):
        codec.unseal(changed)
    TALLY.case(kind)


@settings(max_examples=budget(100))
@given(ring=rings(), other=rings(), payload=payloads)
def test_a_ring_without_the_sealing_key_cannot_open(ring: KeyRing, other: KeyRing, payload: bytes) -> None:
    assume(ring.keys[ring.primary] not in other.keys.values())
    token = _codec(ring).seal(payload)
    with pytest.raises(InvalidRequestState, match="unknown key"):
        _codec(other).unseal(token)
    # The same names with other secrets are other keys: a name is a label, the kid a fingerprint.
    renamed = KeyRing(primary=ring.primary, keys={name: secret[::-1] + b"!" for name, secret in ring.keys.items()})
    with pytest.raises(InvalidRequestState, match="unknown key"):
        _codec(renamed).unseal(token)
    TALLY.case("foreign ring")


@settings(max_examples=budget(100))
@given(ring=rings(), payload=payloads, name=key_names, secret=secrets)
def test_rotation_opens_old_tokens_until_the_old_key_retires(
    ring: KeyRing, payload: bytes, name: str, secret: bytes
) -> None:
    assume(name not in ring.keys and secret not in ring.keys.values())
    token = _codec(ring).seal(payload)
    promoted = ring.with_key(name, secret).promoted(name)
    assert _codec(promoted).unseal(token) == payload
    retired = promoted
    for old in ring.keys:
        retired = retired.without_key(old)
    with pytest.raises(InvalidRequestState, match="unknown key"):
        _codec(retired).unseal(token)
    TALLY.case("rotated")


@settings(max_examples=budget(100))
@given(ring=rings(), extra=st.integers(1, 200_000), text=st.sampled_from(["A", "v1.", "v1.AAAA", "\u00e9"]))
def test_an_oversized_token_is_refused_before_decoding(ring: KeyRing, extra: int, text: str) -> None:
    token = (text * (LIMIT + extra))[: LIMIT + extra]
    with pytest.raises(InvalidRequestState) as refused:
        _codec(ring).unseal(token)
    assert str(refused.value) == OVERSIZED
    at_limit = token[:LIMIT]  # at the limit it is decoded, and refused for what it is
    with pytest.raises(InvalidRequestState) as malformed:
        _codec(ring).unseal(at_limit)
    assert str(malformed.value) != OVERSIZED
    TALLY.case("oversized")


@settings(max_examples=budget(30))
@given(ring=rings(), size=st.integers(LIMIT * 3 // 4 - 100, LIMIT))
def test_a_payload_too_big_to_seal_is_never_sealed(ring: KeyRing, size: int) -> None:
    codec = _codec(ring)
    payload = b"x" * size
    sealed_size = len("v1.") + len(base64.urlsafe_b64encode(bytes(4 + 12 + size + 16)).rstrip(b"="))
    if sealed_size > LIMIT:
        with pytest.raises(ValueError, match="exceeds"):
            codec.seal(payload)
        TALLY.case("refused")
    else:
        assert codec.unseal(codec.seal(payload)) == payload
        TALLY.case("sealed")


# --- the plaintext layout -----------------------------------------------------------------------------

layout_data = st.dictionaries(st.text(max_size=6), json_values, max_size=4)
traces = st.builds(
    Trace,
    hops=st.integers(0, 10_000),
    visited=st.lists(st.tuples(st.text(max_size=8), st.sampled_from([1, 2])).map(list), max_size=40),
)
_RESERVED = frozenset({"fmt", "data", "hops", "visited", "trace", "sealed_at"})
extras: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
    st.text(min_size=1, max_size=8).filter(lambda key: key not in _RESERVED), json_values, max_size=3
)


@settings(max_examples=budget(200))
@given(writer=st.sampled_from([(1, 1), (2, 1), (2, 2)]), data=layout_data, trace=traces, extra=extras)
def test_every_reader_of_a_format_reads_back_what_was_written(
    writer: tuple[int, int], data: dict[str, Any], trace: Trace, extra: dict[str, Any]
) -> None:
    version, fmt = writer
    text = StateLayout(version, fmt).encode(data, trace, extra)
    for reader_version, formats in READABLE_FORMATS.items():
        if fmt not in formats:
            with pytest.raises(UnreadableState):
                StateLayout(reader_version).decode(text)
            continue
        decoded = StateLayout(reader_version).decode(text)
        assert (decoded.fmt, decoded.data, decoded.trace) == (fmt, data, trace)
        carried = {k: v for k, v in decoded.extra.items() if k != "sealed_at"}
        assert carried == extra  # unknown fields travel on, whoever reads them
    TALLY.case(f"v{version} writes {fmt}")


plaintexts = st.one_of(
    changed_layouts(layout_data, traces), changed_layouts(layout_data, traces), json_values.map(json.dumps), any_text
)


@settings(max_examples=budget(400))
@given(version=st.sampled_from(sorted(READABLE_FORMATS)), plaintext=plaintexts)
def test_any_plaintext_is_read_or_answered_with_start_again(version: int, plaintext: str) -> None:
    """Only the fleet can seal a state, but a layout it cannot read must still be "start again", never a crash."""
    try:
        decoded = StateLayout(version).decode(plaintext)
    except UnreadableState as exc:
        unreadable: UnreadableState | None = exc
    else:
        unreadable = None
    if unreadable is not None:
        assert unreadable.error.data == {"reason": "unreadable_request_state", "restart": True}
        TALLY.case("start again")
        return
    assert decoded.fmt in READABLE_FORMATS[version]
    assert isinstance(decoded.data, dict)
    assert isinstance(decoded.trace.hops, int)
    TALLY.case("read")
