"""Each round's body is spliced from a once-encoded request, byte for byte what `encode_request` makes of the round."""

from __future__ import annotations

from typing import Any

import pytest

from mrtr_client import _wire
from mrtr_client._loop import Reply, RetryPolicy, Send, mrtr_loop, new_id_source
from mrtr_protocol.wire import encode_request, request_meta

META = request_meta({"elicitation": {}}, _wire.CLIENT_INFO)
PARAMS: list[dict[str, Any]] = [
    {"name": "count_primes", "arguments": {"limit": 10_000_000, "segment": 100_000}, "_meta": META},
    {"name": "caf\u00e9 \U0001f600", "arguments": {"x": [1.5, None, True, '"\\\n'], "": {}}, "_meta": META},
    {"uri": "file:///a b", "_meta": {}},
    {"_meta": META, "name": "meta first"},
    {"name": "own state", "requestState": "theirs", "_meta": META},
    {"name": "own answers", "inputResponses": {"k": 1}, "_meta": META},
]
ROUNDS: list[tuple[int | str, dict[str, Any] | None, str | None]] = [
    (1, None, None),
    (2, None, "v1.Q7HuiG7m0DM3Dac5Y9tlPH1TTVSRUpJoQcCEXxmgpxQ0I7WI8l3of7aH_-"),
    (3, {"q1": {"action": "accept", "content": {"name": "caf\u00e9"}}}, None),
    (40, {"q1": {"action": "decline"}}, 's\u00e9"tate'),
    ("id-5", {}, ""),
]


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize(("request_id", "responses", "state"), ROUNDS)
def test_a_round_body_is_what_encode_request_makes(
    params: dict[str, Any], request_id: Any, responses: dict[str, Any] | None, state: str | None
) -> None:
    call_params = dict(params)
    if responses is not None:
        call_params["inputResponses"] = responses
    if state is not None:
        call_params["requestState"] = state
    bodies = _wire.RoundBodies("tools/call", params)
    assert bodies.body(request_id, responses, state) == encode_request(request_id, "tools/call", call_params)


def test_the_loop_sends_each_round_as_before() -> None:
    """Rounds with a state, then a question and a state, then complete: ids, bodies and headers as before."""
    params = {"name": "count_primes", "arguments": {"limit": 100}}
    caps: dict[str, Any] = {"elicitation": {}}
    loop = mrtr_loop("tools/call", params, caps, new_id_source(), RetryPolicy(), {"Authorization": "Bearer t"})
    meta = request_meta(caps, _wire.CLIENT_INFO)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    headers |= {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "count_primes"}
    headers |= {"Authorization": "Bearer t"}
    first = next(loop)
    assert isinstance(first, Send)
    assert first.body == encode_request(1, "tools/call", {**params, "_meta": meta})
    assert first.headers == headers
    shed = b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"s1"}}'
    second = loop.send(Reply(200, {"content-type": "application/json"}, shed, 1.0))
    assert isinstance(second, Send)
    assert second.body == encode_request(2, "tools/call", {**params, "_meta": meta, "requestState": "s1"})
    assert second.headers == headers
    asked = b'{"jsonrpc":"2.0","id":2,"result":{"resultType":"input_required","requestState":"s2",'
    asked += b'"inputRequests":{"q":{"method":"elicitation/create","params":{"message":"?","requestedSchema":{}}}}}}'
    assert loop.send(Reply(200, {"content-type": "application/json"}, asked, 1.0)).requests == {  # type: ignore[union-attr]
        "q": {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {}}}
    }
    third = loop.send({"q": {"action": "accept"}})
    assert isinstance(third, Send)
    expected = {**params, "_meta": meta, "inputResponses": {"q": {"action": "accept"}}, "requestState": "s2"}
    assert third.body == encode_request(3, "tools/call", expected)
    done = b'{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","content":[]}}'
    with pytest.raises(StopIteration) as end:
        loop.send(Reply(200, {"content-type": "application/json"}, done, 1.0))
    assert end.value.value.result == {"resultType": "complete", "content": []}
