"""Hostile `requestState` against a real worker: a changed state never completes anything.

The states are real (elicitation, sampling, roots and URL rounds, compute
hand-backs and a question asked midway: `tests.fuzz.origins`), presented
with the answers a correct client would send. The control test shows each
untouched state is accepted and its call completes correctly, so the
properties below can fail. A rejection is the SDK's frozen -32602 "Invalid or
expired requestState" with HTTP 400 (a state over the size limit: -32602 naming
the limit), and is counted once, under a reason its mutation can produce, in
`mrtr_worker_state_rejections_total`.

The last two properties forge states the way only a key holder could
(re-sealing with the fleet's ring): they check each envelope claim is
enforced, and that a layout the worker cannot read is "start the call
again" (`data.restart: true`, README "The sealed requestState"), not counted
as a rejection and never a crash.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from mcp.server.request_state import AESGCMRequestStateCodec

from mrtr_worker.sealing.keyring import KeyRing
from mrtr_worker.sealing.layout import StateLayout, Trace, UnreadableState
from tests.fuzz.budget import budget
from tests.fuzz.calls import Call
from tests.fuzz.origins import EXPECTED, Origins, binding, finish
from tests.fuzz.rejections import assert_rejected, present_and_count
from tests.fuzz.state_strategies import REASONS, changed_layouts, mutated_tokens
from tests.fuzz.tally import TALLY
from tests.fuzz.target import MAX_BODY_BYTES, FuzzTarget
from tests.fuzz.wire_strategies import json_values, plain_hostile_values

LABELS = ["haiku", "hash", "link-1", "link-2", "pi", "primes", "prompt", "resource", "roots"]


@pytest.mark.parametrize("label", LABELS)
def test_an_untouched_state_is_accepted_and_its_call_completes(
    target: FuzzTarget, origins: Origins, label: str
) -> None:
    """The control: what the properties below change is, unchanged, a state that works."""
    origin = origins[label]
    verdict, added = present_and_count(target, origin.call, origin.params(origin.state))
    assert (verdict.kind, added) == ("result", {}), verdict.message
    done = finish(target.mcp, origin, verdict.message["result"])
    assert done.get("isError") is not True, done
    if label in EXPECTED:
        assert done["structuredContent"] == EXPECTED[label]
    if label.startswith("link"):
        assert done["structuredContent"] == {"linked": {"github_login": "octocat", "google_login": "octo"}}


@settings(max_examples=budget(300))
@given(label=st.sampled_from(LABELS), other=st.sampled_from(LABELS), data=st.data())
def test_a_mutated_state_is_rejected_and_counted(
    target: FuzzTarget, origins: Origins, label: str, other: str, data: st.DataObject
) -> None:
    origin = origins[label]
    family, mutated = data.draw(mutated_tokens(origin.state, origins[other].state), label="mutation")
    verdict, added = present_and_count(target, origin.call, origin.params(mutated))
    assert_rejected(verdict, oversized=family == "oversized")
    assert list(added.values()) == [1.0], added  # one rejection, counted once
    (reason,) = added
    assert reason in REASONS[family], (family, reason)
    TALLY.case(f"{family}: {reason}")


@settings(max_examples=budget(100))
@given(label=st.sampled_from(LABELS), other=st.sampled_from(LABELS))
def test_a_state_presented_for_another_request_is_rejected(
    target: FuzzTarget, origins: Origins, label: str, other: str
) -> None:
    """Another tool, prompt or resource, or the same name under another method: the binding differs."""
    mine, theirs = origins[label], origins[other]
    assume(mine.binding != theirs.binding)
    verdict, added = present_and_count(target, theirs.call, theirs.params(mine.state))
    assert_rejected(verdict)
    assert added == {"foreign_request": 1.0}, added
    TALLY.case(f"{theirs.call.method}: foreign_request")


@settings(max_examples=budget(100))
@given(label=st.sampled_from(["haiku", "hash", "pi", "primes", "link-1", "resource", "prompt"]), data=st.data())
def test_a_state_presented_with_other_arguments_is_rejected(
    target: FuzzTarget, origins: Origins, label: str, data: st.DataObject
) -> None:
    origin = origins[label]
    member = "uri" if origin.call.method == "resources/read" else "arguments"
    original = origin.call.params.get(member)
    if member == "uri":
        changed: Any = data.draw(st.sampled_from(["mrtr://reports/8", "mrtr://reports/7/", "MRTR://reports/7"]))
    else:
        changed = dict(original or {})
        key = data.draw(st.sampled_from([*changed, "extra"]))
        changed[key] = data.draw(plain_hostile_values)
        if data.draw(st.booleans()) and changed:
            del changed[data.draw(st.sampled_from(sorted(changed)))]
    call = Call(origin.label, origin.call.method, {**origin.call.params, member: changed}, origin.call.capabilities)
    assume(binding(call.method, call.params) != origin.binding)
    verdict, added = present_and_count(target, call, origin.params(origin.state, call=call))
    assert_rejected(verdict)
    assert added == {"foreign_request": 1.0}, added
    TALLY.case(f"{label}: foreign_request")


@settings(max_examples=budget(60))
@given(
    label=st.sampled_from(LABELS),
    value=st.one_of(st.booleans(), st.integers(), st.floats(allow_nan=False), st.lists(json_values, max_size=3))
    | st.dictionaries(st.text(max_size=5), json_values, max_size=3),
)
def test_a_state_that_is_not_a_string_is_rejected(target: FuzzTarget, origins: Origins, label: str, value: Any) -> None:
    """(A JSON null is no state at all: the call starts again, as dropping the member would.)"""
    origin = origins[label]
    verdict, added = present_and_count(target, origin.call, origin.params(value))
    assert_rejected(verdict)
    assert added == {"malformed": 1.0}, added
    TALLY.case(f"{type(value).__name__}: malformed")


def test_a_state_over_the_body_limit_is_refused_by_size_and_the_worker_stays_up(
    target: FuzzTarget, origins: Origins
) -> None:
    origin = origins["link-1"]
    before = target.rejections()
    verdict = target.call(origin.call, origin.params(origin.state + "A" * MAX_BODY_BYTES))
    assert (verdict.status, verdict.kind) == (413, "transport")
    assert target.rejections() == before  # refused before any JSON-RPC, so not a state rejection
    target.assert_healthy()


# --- forged by a key holder ---------------------------------------------------------------------------------


def _claims(ring: KeyRing, state: str) -> dict[str, Any]:
    claims: dict[str, Any] = json.loads(AESGCMRequestStateCodec(ring.sealing_order()).unseal(state))
    return claims


def _seal(ring: KeyRing, claims: dict[str, Any]) -> str:
    return AESGCMRequestStateCodec(ring.sealing_order()).seal(json.dumps(claims).encode())


def _not_equal_to(value: Any) -> st.SearchStrategy[Any]:
    return plain_hostile_values.filter(lambda v: v != value)


REMOVED_REASON = {"v": "malformed", "s": "malformed", "iat": "malformed", "exp": "malformed"}
"""A missing claim the envelope needs is malformed; a missing binding claim is a mismatch like any other."""
CLAIM_REASON = {
    "v": "malformed",
    "s": "malformed",
    "iat": "future",
    "exp": "expired",
    "m": "foreign_request",
    "t": "foreign_request",
    "a": "foreign_request",
    "aud": "foreign_audience",
    "p": "foreign_principal",
}


@settings(max_examples=budget(120))
@given(label=st.sampled_from(LABELS), claim=st.sampled_from(sorted(CLAIM_REASON)), data=st.data())
def test_every_envelope_claim_is_enforced(
    target: FuzzTarget, origins: Origins, keyring: KeyRing, label: str, claim: str, data: st.DataObject
) -> None:
    """Each claim the boundary checks, removed or set to a value that does not match, rejects the state."""
    origin = origins[label]
    claims = _claims(keyring, origin.state)
    reason = CLAIM_REASON[claim]
    if claim != "p" and data.draw(st.booleans(), label="remove"):
        del claims[claim]
        reason = REMOVED_REASON.get(claim, reason)
    elif claim == "iat":
        # Fixed bounds (not the clock): hypothesis needs the same strategy on every run.
        claims["iat"] = data.draw(st.floats(4e9, 1e18) | st.sampled_from(["0", None, [0], float("nan")]))
    elif claim == "exp":
        claims["exp"] = data.draw(st.floats(-1e18, 1e9) | st.sampled_from(["9e99", None, [9e99], float("nan")]))
    elif claim == "s":
        claims["s"] = data.draw(json_values.filter(lambda v: not isinstance(v, str)))
    else:  # v, m, t, a, aud; p (anonymous worker: any principal claim is drift)
        claims[claim] = data.draw(_not_equal_to(claims.get(claim)), label="value")
    verdict, added = present_and_count(target, origin.call, origin.params(_seal(keyring, claims)))
    assert_rejected(verdict)
    assert added == {reason: 1.0}, (claim, claims.get(claim), added)
    TALLY.case(f"{claim}: {reason}")


@settings(max_examples=budget(100))
@given(
    label=st.sampled_from(["link-1", "prompt", "resource", "haiku"]),
    layout=changed_layouts(st.just({}), st.builds(Trace, hops=st.integers(0, 5), visited=st.just([])))
    | json_values.map(json.dumps),
)
def test_a_layout_the_worker_cannot_read_asks_to_start_again(
    target: FuzzTarget, origins: Origins, keyring: KeyRing, label: str, layout: str
) -> None:
    """Inside a valid envelope: the worker's own reader decides, and the wire says so (restart or a round)."""
    origin = origins[label]
    claims = _claims(keyring, origin.state)
    claims["s"] = layout
    try:
        decoded = StateLayout(1).decode(layout)
    except UnreadableState:
        decoded = None
    assume(decoded is None or decoded.data == {})  # the tools trust data the fleet sealed; fuzz only the layout
    verdict, added = present_and_count(target, origin.call, origin.params(_seal(keyring, claims), {}))
    assert added == {}, added  # the envelope is valid: not a rejection
    if decoded is None:
        assert verdict.kind == "error", verdict.message
        error = verdict.message["error"]
        assert (verdict.status, error["code"]) == (400, -32602)
        assert error["data"] == {"reason": "unreadable_request_state", "restart": True}
        TALLY.case("start again")
    else:
        assert verdict.kind == "result", verdict.message
        assert verdict.message["result"]["resultType"] == "input_required"  # asked again: no answers were sent
        TALLY.case("read: asked again")
