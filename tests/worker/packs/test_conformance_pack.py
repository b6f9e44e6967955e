"""The conformance pack over real HTTP: a worker process serving it, driven with plain 2026-07-28 requests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mrtr_protocol import events
from mrtr_protocol.wire import encode_request, request_headers, request_meta
from tests.conftest import StartWorker
from tests.support.wire import Exchange, McpHttp

ALL_CAPABILITIES: dict[str, Any] = {"sampling": {}, "elicitation": {}, "roots": {}}


class Mcp:
    """Plain 2026-07-28 requests to the pack (every answer schema-checked by `McpHttp`), all capabilities by default."""

    def __init__(self, http: McpHttp) -> None:
        self._http = http

    @property
    def sent_ids(self) -> list[int]:
        return self._http.sent_ids

    def request(self, method: str, params: dict[str, Any], *, capabilities: dict[str, Any] | None = None) -> Exchange:
        return self._http.call(method, params, capabilities=ALL_CAPABILITIES if capabilities is None else capabilities)

    def call(self, tool: str, **extra: Any) -> Exchange:
        capabilities = extra.pop("capabilities", None)
        return self.request("tools/call", {"name": tool, "arguments": {}, **extra}, capabilities=capabilities)


@pytest.fixture(scope="module")
def worker_url(start_worker: StartWorker) -> str:
    """A worker process serving only the conformance pack."""
    spec, _ = start_worker(tool_packs=("conformance",))
    return f"{spec.url}/mcp"


@pytest.fixture
def mcp(worker_url: str) -> Iterator[Mcp]:
    http = McpHttp(worker_url)
    yield Mcp(http)
    http.close()


def _accept(content: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def _text(result: dict[str, Any]) -> str:
    return "\n".join(block["text"] for block in result["content"] if block["type"] == "text")


def test_multi_round_asks_three_rounds_with_a_new_state_each_round(mcp: Mcp) -> None:
    tool = "test_input_required_result_multi_round"
    first = mcp.call(tool).result
    assert first["resultType"] == "input_required"
    assert list(first["inputRequests"]) == ["step1"]
    assert first["inputRequests"]["step1"]["method"] == "elicitation/create"

    second = mcp.call(
        tool, inputResponses={"step1": _accept({"name": "Alice"})}, requestState=first["requestState"]
    ).result
    assert second["resultType"] == "input_required"
    assert list(second["inputRequests"]) == ["step2"]
    assert second["requestState"] != first["requestState"]

    third = mcp.call(
        tool, inputResponses={"step2": _accept({"color": "blue"})}, requestState=second["requestState"]
    ).result
    assert third["resultType"] == "complete"
    assert "Alice" in _text(third)
    assert "blue" in _text(third)
    assert len(set(mcp.sent_ids)) == 3  # each round is a new request


def test_multi_round_reasks_when_an_answer_is_missing(mcp: Mcp) -> None:
    tool = "test_input_required_result_multi_round"
    first = mcp.call(tool).result
    again = mcp.call(tool, inputResponses={"wrong": _accept({"x": 1})}, requestState=first["requestState"]).result
    assert again["resultType"] == "input_required"
    assert list(again["inputRequests"]) == ["step1"]


def test_tampered_state_is_rejected_with_invalid_params_and_http_400(mcp: Mcp) -> None:
    tool = "test_input_required_result_tampered_state"
    first = mcp.call(tool).result
    state = first["requestState"]
    answers = {"confirm": _accept({"ok": True})}

    tampered = mcp.call(tool, inputResponses=answers, requestState=state + "-TAMPERED")
    assert tampered.status == 400
    assert tampered.error["code"] == -32602
    assert state not in json.dumps(tampered.message)

    genuine = mcp.call(tool, inputResponses=answers, requestState=state)
    assert genuine.status == 200
    assert genuine.result["resultType"] == "complete"
    assert "state-ok" in _text(genuine.result)


def test_state_of_one_fixture_is_refused_by_another(mcp: Mcp) -> None:
    state = mcp.call("test_input_required_result_tampered_state").result["requestState"]
    foreign = mcp.call(
        "test_input_required_result_request_state",
        inputResponses={"confirm": _accept({"ok": True})},
        requestState=state,
    )
    assert foreign.status == 400
    assert foreign.error["code"] == -32602


def test_capability_check_sends_no_elicitation_when_only_sampling_is_declared(mcp: Mcp) -> None:
    reply = mcp.call("test_input_required_result_capabilities", capabilities={"sampling": {}})
    assert reply.status == 200
    result = reply.result
    assert result["resultType"] == "input_required"
    methods = {request["method"] for request in result["inputRequests"].values()}
    assert methods == {"sampling/createMessage"}


def test_capability_check_without_any_input_capability_needs_one(mcp: Mcp) -> None:
    reply = mcp.call("test_input_required_result_capabilities", capabilities={})
    assert reply.status == 400
    assert reply.error["code"] == -32021
    assert reply.error["data"]["requiredCapabilities"] == {"sampling": {}}


def test_missing_capability_answers_32021_with_required_capabilities(mcp: Mcp) -> None:
    reply = mcp.call("test_missing_capability", capabilities={"elicitation": {}})
    assert reply.status == 400
    assert reply.error["code"] == -32021
    assert reply.error["data"]["requiredCapabilities"] == {"sampling": {}}
    assert mcp.call("test_missing_capability", capabilities={"sampling": {}}).result["resultType"] == "complete"


def test_answers_on_a_first_call_without_state_are_accepted(mcp: Mcp) -> None:
    result = mcp.call("test_input_required_result_elicitation", inputResponses={"user_name": _accept({"name": "Bo"})})
    assert result.result["resultType"] == "complete"
    assert _text(result.result) == "Hello, Bo!"


def test_multiple_inputs_keeps_partial_answers_in_the_state(mcp: Mcp) -> None:
    tool = "test_input_required_result_multiple_inputs"
    first = mcp.call(tool).result
    methods = {key: request["method"] for key, request in first["inputRequests"].items()}
    assert methods == {
        "user_name": "elicitation/create",
        "greeting": "sampling/createMessage",
        "client_roots": "roots/list",
    }

    partial = mcp.call(
        tool, inputResponses={"user_name": _accept({"name": "Alice"})}, requestState=first["requestState"]
    )
    assert set(partial.result["inputRequests"]) == {"greeting", "client_roots"}

    sampled = {"role": "assistant", "content": {"type": "text", "text": "Hi!"}, "model": "m", "stopReason": "endTurn"}
    roots = {"roots": [{"uri": "file:///work", "name": "work"}]}
    done = mcp.call(
        tool,
        inputResponses={"greeting": sampled, "client_roots": roots},
        requestState=partial.result["requestState"],
    ).result
    assert done["resultType"] == "complete"
    assert "name=Alice" in _text(done)


def test_a_prompt_missing_a_required_argument_is_invalid_params(mcp: Mcp) -> None:
    ex = mcp.request("prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a"}})
    assert (ex.status, ex.error["code"]) == (400, -32602)
    assert ex.error["data"] == {"name": "test_prompt_with_arguments", "missing": ["arg2"], "unexpected": []}
    done = mcp.request("prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}})
    assert "arg2='b'" in done.result["messages"][0]["content"]["text"]


def test_prompt_completes_with_messages_after_the_retry(mcp: Mcp) -> None:
    params = {"name": "test_input_required_result_prompt"}
    first = mcp.request("prompts/get", params).result
    assert first["resultType"] == "input_required"
    retry = {**params, "inputResponses": {"user_context": _accept({"context": "tests"})}}
    done = mcp.request("prompts/get", {**retry, "requestState": first["requestState"]}).result
    assert done["resultType"] == "complete"
    assert done["messages"][0]["content"]["text"] == "Use the following context: tests"


def test_progress_tool_streams_0_50_100(worker_url: str) -> None:
    params = {"name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": "p", **request_meta({})}}
    body = encode_request(7, "tools/call", params)
    response = httpx.post(worker_url, content=body, headers=request_headers("tools/call", params), timeout=10.0)
    assert response.headers["content-type"].startswith(events.EVENT_STREAM)
    received = events.messages(response.headers["content-type"], response.content)
    progress = [e["params"]["progress"] for e in received if e.get("method") == "notifications/progress"]
    assert progress == [0, 50, 100]
    assert received[-1]["id"] == 7
    assert received[-1]["result"]["resultType"] == "complete"
