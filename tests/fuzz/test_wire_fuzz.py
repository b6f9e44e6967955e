"""Hostile JSON-RPC over HTTP against a real worker: never a 5xx, always a valid answer, never down.

Every case goes through `FuzzTarget.send`, which judges the answer with the
oracle (`tests.fuzz.oracle`) and checks the process is alive and logged no
traceback; each property ends with a health check.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.fuzz.budget import budget
from tests.fuzz.call_strategies import ALL_CAPABILITIES, prompt_and_resource_calls, tool_calls
from tests.fuzz.calls import ELICIT, VALID_CALLS, Call, envelope, headers_for
from tests.fuzz.jsontext import to_json
from tests.fuzz.oracle import Sent
from tests.fuzz.tally import TALLY
from tests.fuzz.target import FuzzTarget
from tests.fuzz.wire_strategies import (
    broken_requests,
    header_mutation,
    hostile_values,
    json_values,
    sent_with_correct_headers,
)


@pytest.mark.parametrize("call", VALID_CALLS, ids=[c.label for c in VALID_CALLS])
def test_every_valid_request_gets_a_result(target: FuzzTarget, call: Call) -> None:
    """The control: unbroken, each starting point of the fuzz passes the oracle with a result."""
    body = json.dumps(call.document(7)).encode()
    verdict, _ = target.send(Sent(body, headers_for(json.loads(body))))
    assert (verdict.status, verdict.kind) == (200, "result"), verdict.message
    assert verdict.message["id"] == 7


@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25"])
@pytest.mark.parametrize("call", VALID_CALLS, ids=[c.label for c in VALID_CALLS])
def test_every_valid_request_under_a_2025_era_header_is_refused_with_unsupported_version(
    target: FuzzTarget, call: Call, version: str
) -> None:
    """The fleet speaks 2026-07-28 only: the oracle holds a 2025-era request to the -32022 refusal."""
    doc = call.document(9)
    headers = [(k, version.encode() if k == "MCP-Protocol-Version" else v) for k, v in headers_for(doc)]
    verdict, _ = target.send(Sent(json.dumps(doc).encode(), headers))
    assert verdict.kind == "error", verdict


@settings(max_examples=budget(300))
@given(case=broken_requests())
def test_broken_requests_get_valid_answers(target: FuzzTarget, case: tuple[Call, Sent]) -> None:
    _, sent = case
    verdict, _ = target.send(sent)
    TALLY.case(verdict.outcome)


FOUND_BY_FUZZING = [
    Call("tool:hash_chain", "tools/call", {"name": "hash_chain", "arguments": {"seed": "\ud800", "iterations": 1}}, {}),
    Call("prompt", "prompts/get", {"name": "no_such_prompt"}, ALL_CAPABILITIES),
    Call("prompt", "prompts/get", {"name": "onboarding", "arguments": {"x": ""}}, ALL_CAPABILITIES),
]
"""Cases that once failed (fixed in the worker), tried first on every run."""


@settings(max_examples=budget(250))
@given(call=tool_calls() | prompt_and_resource_calls(), request_id=st.integers(0, 2**31))
@example(call=FOUND_BY_FUZZING[0], request_id=0)
@example(call=FOUND_BY_FUZZING[1], request_id=0)
@example(call=FOUND_BY_FUZZING[2], request_id=0)
def test_fuzzed_arguments_and_answers_get_valid_answers(target: FuzzTarget, call: Call, request_id: int) -> None:
    """Valid envelopes, hostile content: tool arguments, answers to questions, prompt names, resource URIs."""
    body = to_json(call.document(request_id)).encode("utf-8", "surrogatepass")
    verdict, _ = target.send(sent_with_correct_headers(body))
    TALLY.case(f"{call.label}: {verdict.outcome}")


@settings(max_examples=budget(200))
@given(data=st.data())
def test_broken_headers_get_valid_answers(target: FuzzTarget, data: st.DataObject) -> None:
    call = data.draw(st.sampled_from(VALID_CALLS))
    doc = call.document(data.draw(st.integers(0, 1000)))
    headers = headers_for(doc)
    for _ in range(data.draw(st.integers(1, 3))):
        headers = data.draw(header_mutation(headers))
    sent = Sent(json.dumps(doc).encode(), headers)
    verdict, _ = target.send(sent)
    TALLY.case(f"2025 era: {verdict.outcome}" if sent.legacy else verdict.outcome)


@settings(max_examples=budget(120))
@given(body=st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_arbitrary_bodies_get_valid_answers(target: FuzzTarget, body: bytes) -> None:
    """Bytes and JSON values that were never a request, with a client's usual headers."""
    verdict, _ = target.send(Sent(body, headers_for(None)))
    TALLY.case(verdict.outcome)


@settings(max_examples=budget(60))
@given(value=hostile_values)
def test_any_value_as_request_state_or_answers_never_completes_a_login(target: FuzzTarget, value: object) -> None:
    """`requestState` and `inputResponses` are the MRTR members: a hostile value in either never links accounts."""
    for member in ("requestState", "inputResponses"):
        params = {"name": "link_accounts", "arguments": {}, member: value, "_meta": envelope(ELICIT)}
        doc = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        verdict, _ = target.send(sent_with_correct_headers(to_json(doc).encode("utf-8", "surrogatepass")))
        if verdict.kind == "result":
            assert verdict.message["result"].get("resultType") == "input_required", verdict.message
        TALLY.case(f"{member}: {verdict.outcome}")
