"""The client's MRTR loop, driven step by step with scripted replies (no network)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.shared.inbound import decode_header_value
from mcp_types import CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY

from mrtr_client import ProtocolViolation, RetryBudgetExhausted, RetryPolicy, RoundsExceeded, RpcError
from mrtr_client._loop import Ask, Failure, Loop, Reply, Send, Sleep, mrtr_loop, new_id_source
from mrtr_client.trace import CallResult
from mrtr_protocol.busy import SERVER_BUSY
from mrtr_protocol.instance import WORKER_ID_HEADER, WORKER_VERSION_HEADER
from mrtr_protocol.rounds import BUSY, COMPLETE, ERROR, ROUND_META_KEY, TRANSPORT, EndOfRound
from mrtr_protocol.wire import PROTOCOL_VERSION

STATE = "v1.opaque+/=state with spaces"  # byte-exact echo, whatever it contains
DECLARED: dict[str, Any] = {"elicitation": {}, "roots": {}}
"""What the scripted calls declare: a server may ask only for these (form elicitation and roots)."""


def _reply(
    request_id: int,
    result: dict[str, Any] | None = None,
    *,
    error: dict[str, Any] | None = None,
    status: int = 200,
    worker: str = "w1",
) -> Reply:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    if error is not None:
        message["error"] = error
    else:
        message["result"] = result
    headers = {"content-type": "application/json", WORKER_ID_HEADER.lower(): worker, WORKER_VERSION_HEADER.lower(): "1"}
    return Reply(status, headers, json.dumps(message).encode(), 1.0)


class Driver:
    """Runs a loop, recording every request it sends."""

    def __init__(
        self, policy: RetryPolicy | None = None, capabilities: dict[str, Any] | None = None, method: str = "tools/call"
    ) -> None:
        params = {"name": "t", "arguments": {"x": 1}}
        caps = DECLARED if capabilities is None else capabilities
        self.loop: Loop = mrtr_loop(method, params, caps, new_id_source(), policy or RetryPolicy())
        self.sent: list[dict[str, Any]] = []
        self.step: Any = next(self.loop)

    def expect_send(self) -> dict[str, Any]:
        assert isinstance(self.step, Send), self.step
        body: dict[str, Any] = json.loads(self.step.body)
        self.sent.append(body)
        return body

    def answer(self, value: Any) -> CallResult | None:
        try:
            self.step = self.loop.send(value)
        except StopIteration as done:
            result: CallResult = done.value
            return result
        return None


def test_retries_have_new_ids_echo_state_exactly_and_carry_answers() -> None:
    d = Driver()
    first = d.expect_send()
    assert "requestState" not in first["params"]
    assert "inputResponses" not in first["params"]
    ask = {"q": {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {}}}}
    d.answer(_reply(first["id"], {"resultType": "input_required", "inputRequests": ask, "requestState": STATE}))
    assert isinstance(d.step, Ask)
    assert list(d.step.requests) == ["q"]
    d.answer({"q": {"action": "accept", "content": {}}})
    retry = d.expect_send()
    assert retry["id"] != first["id"]
    assert retry["params"]["requestState"] == STATE
    assert retry["params"]["inputResponses"] == {"q": {"action": "accept", "content": {}}}
    assert retry["params"]["name"] == "t"
    assert retry["params"]["arguments"] == {"x": 1}
    assert retry["params"]["_meta"][PROTOCOL_VERSION_META_KEY] == PROTOCOL_VERSION
    done = d.answer(_reply(retry["id"], {"resultType": "complete", "content": []}))
    assert done is not None
    assert [h.reason for h in done.trace.hops] == [EndOfRound.INPUT, COMPLETE]


def test_no_state_is_sent_when_none_was_given() -> None:
    d = Driver()
    first = d.expect_send()
    ask = {"q": {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {}}}}
    d.answer(_reply(first["id"], {"resultType": "input_required", "inputRequests": ask}))
    d.answer({"q": {"action": "cancel"}})
    assert "requestState" not in d.expect_send()["params"]


def test_a_state_only_round_is_retried_at_once_honouring_the_hint() -> None:
    d = Driver()
    first = d.expect_send()
    hint = {ROUND_META_KEY: {"reason": EndOfRound.PRESSURE.value, "retryAfterMs": 20}}
    d.answer(_reply(first["id"], {"resultType": "input_required", "requestState": STATE, "_meta": hint}))
    assert isinstance(d.step, Sleep)
    assert d.step.seconds == pytest.approx(0.02)
    d.answer(None)
    retry = d.expect_send()
    assert retry["params"]["requestState"] == STATE
    assert "inputResponses" not in retry["params"]


def test_a_hint_is_capped() -> None:
    d = Driver(RetryPolicy(max_hint_delay=0.5))
    first = d.expect_send()
    hint = {ROUND_META_KEY: {"reason": EndOfRound.ADMISSION.value, "retryAfterMs": 999_999}}
    d.answer(_reply(first["id"], {"resultType": "input_required", "requestState": STATE, "_meta": hint}))
    assert isinstance(d.step, Sleep)
    assert d.step.seconds == 0.5


def test_undelivered_requests_are_resent_with_the_last_state() -> None:
    d = Driver()
    first = d.expect_send()
    d.answer(_reply(first["id"], {"resultType": "input_required", "requestState": STATE}))
    d.expect_send()
    d.answer(Failure("ConnectError", 0.1))
    assert isinstance(d.step, Sleep)
    d.answer(None)
    again = d.expect_send()
    assert again["params"]["requestState"] == STATE
    d.answer(_reply(again["id"], {}, status=502))
    d.answer(None)
    last = d.expect_send()
    assert last["params"]["requestState"] == STATE
    done = d.answer(_reply(last["id"], {"resultType": "complete", "content": []}, worker="w2"))
    assert done is not None
    assert [h.reason for h in done.trace.hops] == [EndOfRound.INPUT, TRANSPORT, TRANSPORT, COMPLETE]
    assert done.trace.instances == ["w1", "w2"]


def test_the_retry_budget_ends_in_a_clear_error() -> None:
    d = Driver(RetryPolicy(max_delivery_failures=2))
    with pytest.raises(RetryBudgetExhausted, match="ConnectError"):
        for _ in range(3):
            d.expect_send()
            d.answer(Failure("ConnectError: refused", 0.1))
            d.answer(None)


def test_rounds_are_capped() -> None:
    d = Driver(RetryPolicy(max_rounds=3))
    with pytest.raises(RoundsExceeded):
        for _ in range(4):
            sent = d.expect_send()
            d.answer(_reply(sent["id"], {"resultType": "input_required", "requestState": STATE}))


def test_a_round_with_too_many_questions_is_a_protocol_violation() -> None:
    d = Driver(RetryPolicy(max_input_requests=2))
    sent = d.expect_send()
    ask = {f"q{n}": {"method": "roots/list", "params": {}} for n in range(3)}
    with pytest.raises(ProtocolViolation, match="3 input requests in one round"):
        d.answer(_reply(sent["id"], {"resultType": "input_required", "inputRequests": ask, "requestState": STATE}))


def test_an_oversized_state_is_a_protocol_violation() -> None:
    d = Driver(RetryPolicy(max_state_bytes=64))
    sent = d.expect_send()
    with pytest.raises(ProtocolViolation, match="requestState of 100 bytes"):
        d.answer(_reply(sent["id"], {"resultType": "input_required", "requestState": "s" * 100}))


def test_an_absent_result_type_means_complete() -> None:
    """A client MUST read it so (a server of an earlier version sends none; the conformance suite checks it)."""
    d = Driver()
    first = d.expect_send()
    assert d.answer(_reply(first["id"], {"content": []})) is not None


def test_an_unknown_result_type_is_a_protocol_violation() -> None:
    d = Driver()
    first = d.expect_send()
    with pytest.raises(ProtocolViolation, match="resultType"):
        d.answer(_reply(first["id"], {"resultType": "task"}))


def test_input_required_with_nothing_in_it_is_a_protocol_violation() -> None:
    d = Driver()
    first = d.expect_send()
    with pytest.raises(ProtocolViolation):
        d.answer(_reply(first["id"], {"resultType": "input_required"}))


def test_an_unreadable_state_restarts_the_call_once() -> None:
    restart = {
        "code": -32602,
        "message": "start again",
        "data": {"reason": "unreadable_request_state", "restart": True},
    }
    d = Driver()
    first = d.expect_send()
    d.answer(_reply(first["id"], {"resultType": "input_required", "requestState": STATE}))
    second = d.expect_send()
    d.answer(_reply(second["id"], error=restart, status=400))
    fresh = d.expect_send()
    assert "requestState" not in fresh["params"]
    d.answer(_reply(fresh["id"], {"resultType": "input_required", "requestState": STATE}))
    again = d.expect_send()
    with pytest.raises(RpcError) as caught:
        d.answer(_reply(again["id"], error=restart, status=400))
    assert caught.value.restart_advised


def _busy(retry_after_ms: int) -> dict[str, Any]:
    return {"code": SERVER_BUSY, "message": "the fleet is full", "data": {"retryAfterMs": retry_after_ms}}


def test_a_busy_refusal_is_sent_again_after_its_hint_within_the_budget() -> None:
    d = Driver(RetryPolicy(max_busy_retries=2, max_hint_delay=1.0))
    first = d.expect_send()
    d.answer(_reply(first["id"], error=_busy(300)))
    assert isinstance(d.step, Sleep)
    assert d.step.seconds == pytest.approx(0.3)
    d.answer(None)
    second = d.expect_send()
    assert second["id"] != first["id"]
    assert second["params"]["arguments"] == {"x": 1}
    d.answer(_reply(second["id"], error=_busy(60_000)))
    assert isinstance(d.step, Sleep)
    assert d.step.seconds == 1.0  # capped like any hint
    d.answer(None)
    third = d.expect_send()
    done = d.answer(_reply(third["id"], {"resultType": "complete", "content": []}))
    assert done is not None
    assert [h.reason for h in done.trace.hops] == [BUSY, BUSY, COMPLETE]


def test_past_the_budget_the_busy_refusal_is_raised_with_its_hint() -> None:
    d = Driver(RetryPolicy(max_busy_retries=1))
    first = d.expect_send()
    d.answer(_reply(first["id"], error=_busy(200)))
    d.answer(None)
    second = d.expect_send()
    with pytest.raises(RpcError) as caught:
        d.answer(_reply(second["id"], error=_busy(400)))
    assert (caught.value.code, caught.value.retry_after_ms) == (SERVER_BUSY, 400)


@pytest.mark.parametrize(
    "error",
    [
        {"code": SERVER_BUSY, "message": "busy, no hint"},
        {"code": SERVER_BUSY, "message": "a bad hint", "data": {"retryAfterMs": "soon"}},
        {"code": -32603, "message": "not busy", "data": {"retryAfterMs": 10}},
    ],
)
def test_an_error_that_is_not_a_busy_refusal_with_a_hint_is_raised_at_once(error: dict[str, Any]) -> None:
    d = Driver()
    first = d.expect_send()
    with pytest.raises(RpcError) as caught:
        d.answer(_reply(first["id"], error=error))
    assert caught.value.retry_after_ms is None


def test_a_json_rpc_error_is_raised_with_code_and_data() -> None:
    d = Driver()
    first = d.expect_send()
    with pytest.raises(RpcError) as caught:
        d.answer(_reply(first["id"], error={"code": -32021, "message": "m", "data": {"x": 1}}, status=400))
    assert (caught.value.code, caught.value.data, caught.value.http_status) == (-32021, {"x": 1}, 400)


def test_an_event_stream_reply_is_read_to_its_final_message() -> None:
    d = Driver()
    first = d.expect_send()
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    final = {"jsonrpc": "2.0", "id": first["id"], "result": {"resultType": "complete", "content": []}}
    body = f"event: message\ndata: {json.dumps(progress)}\n\nevent: message\ndata: {json.dumps(final)}\n\n".encode()
    done = d.answer(Reply(200, {"content-type": "text/event-stream"}, body, 1.0))
    assert done is not None
    assert done.result["resultType"] == "complete"


def test_each_hop_is_named_by_the_hint_and_no_hint_means_input() -> None:
    restart = {"code": -32602, "message": "start again", "data": {"restart": True}}
    d = Driver()
    first = d.expect_send()
    hint = {ROUND_META_KEY: {"reason": EndOfRound.SLICE.value, "hops": 1}}
    d.answer(_reply(first["id"], {"resultType": "input_required", "requestState": STATE, "_meta": hint}))
    second = d.expect_send()
    d.answer(_reply(second["id"], {"resultType": "input_required", "requestState": STATE}))
    third = d.expect_send()
    d.answer(_reply(third["id"], error=restart, status=400))
    fresh = d.expect_send()
    done = d.answer(_reply(fresh["id"], {"resultType": "complete", "content": []}))
    assert done is not None
    assert [h.reason for h in done.trace.hops] == [EndOfRound.SLICE, EndOfRound.INPUT, ERROR, COMPLETE]


@pytest.mark.parametrize("name", ["plain", " edge spaces ", "caf\u00e9 \u2603", "=?base64?aGk=?="])
def test_the_name_header_is_the_sdks_encoding_and_meta_names_the_client(name: str) -> None:
    loop = mrtr_loop("tools/call", {"name": name, "arguments": {}}, {}, new_id_source(), RetryPolicy())
    send = next(loop)
    assert isinstance(send, Send)
    assert send.headers["MCP-Protocol-Version"] == PROTOCOL_VERSION
    assert send.headers["Mcp-Method"] == "tools/call"
    assert send.headers["Mcp-Name"].isascii()
    assert decode_header_value(send.headers["Mcp-Name"]) == name
    assert json.loads(send.body)["params"]["_meta"][CLIENT_INFO_META_KEY]["name"] == "mrtr-client"


def test_a_json_error_without_an_id_is_still_the_answer() -> None:
    d = Driver()
    d.expect_send()
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}).encode()
    with pytest.raises(RpcError) as caught:
        d.answer(Reply(400, {"content-type": "application/json"}, body, 1.0))
    assert caught.value.code == -32700


@pytest.mark.parametrize(
    ("content_type", "body", "problem"),
    [
        ("application/json", b"<html>bad gateway</html>", "HTTP 200: response is not JSON"),
        ("application/json", b'"\xff\xfe"', "HTTP 200: response is not JSON"),
        ("application/json", b"[1, 2]", "HTTP 200: response is not a JSON-RPC object"),
        ("text/event-stream", b"data: not json\n\n", "without a response to request 1"),
        ("text/event-stream", b'data: {"jsonrpc": "2.0", "id": 99, "result": {}}\n\n', "without a response"),
    ],
)
def test_an_unreadable_reply_is_a_protocol_violation(content_type: str, body: bytes, problem: str) -> None:
    d = Driver()
    d.expect_send()
    with pytest.raises(ProtocolViolation, match=problem):
        d.answer(Reply(200, {"content-type": content_type}, body, 1.0))


def test_an_event_stream_is_read_whatever_its_line_ends_and_comments() -> None:
    d = Driver()
    first = d.expect_send()
    final = json.dumps({"jsonrpc": "2.0", "id": first["id"], "result": {"resultType": "complete", "content": []}})
    body = f": keep-alive\r\nevent: message\r\ndata: {final[:10]}\r\ndata:{final[10:]}\r\n\r\n".encode()
    done = d.answer(Reply(200, {"content-type": "text/event-stream; charset=utf-8"}, body, 1.0))
    assert done is not None
    assert done.result == {"resultType": "complete", "content": []}
