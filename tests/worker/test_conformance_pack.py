"""The conformance pack over real HTTP: a worker process serving it, driven with plain 2026-07-28 requests."""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr_worker.keyring import new_ring

PROTOCOL_VERSION = "2026-07-28"
ALL_CAPABILITIES: dict[str, Any] = {"sampling": {}, "elicitation": {}, "roots": {}}
READY_TIMEOUT = 30.0  # only guards against hanging


@dataclass(frozen=True)
class Reply:
    status: int
    message: dict[str, Any]

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.message, self.message
        result: dict[str, Any] = self.message["result"]
        return result

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.message, self.message
        error: dict[str, Any] = self.message["error"]
        return error


class Mcp:
    """Just enough of a 2026-07-28 HTTP client to see the wire: ids, headers, status codes."""

    def __init__(self, http: httpx.Client, url: str) -> None:
        self._http = http
        self._url = url
        self._ids = itertools.count(1)
        self.sent_ids: list[int] = []

    def request(self, method: str, params: dict[str, Any], *, capabilities: dict[str, Any] | None = None) -> Reply:
        request_id = next(self._ids)
        self.sent_ids.append(request_id)
        meta = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": ALL_CAPABILITIES if capabilities is None else capabilities,
        }
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": meta}}
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "Mcp-Method": method,
        }
        name = params.get("name", params.get("uri"))
        if name is not None:
            headers["Mcp-Name"] = name
        response = self._http.post(self._url, json=body, headers=headers)
        return Reply(response.status_code, _response_message(response, request_id))

    def call(self, tool: str, **extra: Any) -> Reply:
        capabilities = extra.pop("capabilities", None)
        return self.request("tools/call", {"name": tool, "arguments": {}, **extra}, capabilities=capabilities)


def _response_message(response: httpx.Response, request_id: int) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:"):
                message: dict[str, Any] = json.loads(line.removeprefix("data:"))
                if message.get("id") == request_id:
                    return message
        raise AssertionError(f"no response to request {request_id} on the stream: {response.text!r}")
    parsed: dict[str, Any] = response.json()
    return parsed


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def worker_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A worker process serving only the conformance pack on a free 127.0.0.1 port."""
    port = _free_port()
    log_path: Path = tmp_path_factory.mktemp("worker") / "worker.log"
    env = {
        **os.environ,
        "MRTR_WORKER_KEYRING": new_ring("test").dumps(),
        "MRTR_WORKER_HOST": "127.0.0.1",
        "MRTR_WORKER_PORT": str(port),
        "MRTR_WORKER_TOOL_PACKS": "conformance",
        "MRTR_WORKER_INSTANCE_ID": "conformance-test",
    }
    env.pop("MRTR_WORKER_KEYRING_FILE", None)
    base = f"http://127.0.0.1:{port}"
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mrtr_worker"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_ready(proc, f"{base}/readyz", log_path)
        yield f"{base}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        try:
            code = proc.wait(timeout=0.05)  # the poll interval, and the check that the worker still runs
        except subprocess.TimeoutExpired:
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker not ready after {READY_TIMEOUT} s:\n{log_path.read_text()}") from None
            continue
        raise RuntimeError(f"worker exited with {code} before it was ready:\n{log_path.read_text()}")


@pytest.fixture
def mcp(worker_url: str) -> Iterator[Mcp]:
    with httpx.Client(timeout=10.0) as http:
        yield Mcp(http, worker_url)


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


def test_prompt_completes_with_messages_after_the_retry(mcp: Mcp) -> None:
    params = {"name": "test_input_required_result_prompt"}
    first = mcp.request("prompts/get", params).result
    assert first["resultType"] == "input_required"
    retry = {**params, "inputResponses": {"user_context": _accept({"context": "tests"})}}
    done = mcp.request("prompts/get", {**retry, "requestState": first["requestState"]}).result
    assert done["resultType"] == "complete"
    assert done["messages"][0]["content"]["text"] == "Use the following context: tests"


def test_progress_tool_streams_0_50_100(worker_url: str) -> None:
    meta = {
        "progressToken": "p",
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "test_tool_with_progress", "arguments": {}, "_meta": meta},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "test_tool_with_progress",
    }
    response = httpx.post(worker_url, json=body, headers=headers, timeout=10.0)
    events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    progress = [e["params"]["progress"] for e in events if e.get("method") == "notifications/progress"]
    assert progress == [0, 50, 100]
    assert events[-1]["id"] == 7
    assert events[-1]["result"]["resultType"] == "complete"
