"""Every kind of bad input gets a clear JSON-RPC error (never a 500) and the worker stays up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY

from mrtr_ops.local.process import WorkerSpec
from mrtr_protocol.wire import PROTOCOL_VERSION, encode_request, request_headers, request_meta
from tests.support.wire import McpHttp

ELICIT: dict[str, object] = {"elicitation": {}}


@pytest.fixture
def mcp(worker: WorkerSpec) -> Iterator[McpHttp]:
    client = McpHttp(f"{worker.url}/mcp")
    yield client
    client.close()


def test_malformed_json_is_a_parse_error(mcp: McpHttp) -> None:
    ex = mcp.send("tools/list", b'{"jsonrpc": "2.0", "id": 1, "meth', request_headers("tools/list", {}))
    assert (ex.status, ex.error["code"]) == (400, -32700)


@pytest.mark.parametrize("body", [b'{"jsonrpc":"2.0","id":1,"result":{}}', b"[1, 2]", b'"text"'])
def test_a_body_that_is_not_a_request_is_invalid(mcp: McpHttp, body: bytes) -> None:
    ex = mcp.send("tools/list", body, request_headers("tools/list", {}))
    assert (ex.status, ex.error["code"]) == (400, -32600)


@pytest.mark.parametrize("method", ["no/such/method", "initialize", "ping"])
def test_unknown_and_removed_methods_are_404(mcp: McpHttp, method: str) -> None:
    ex = mcp.call(method, {})
    assert (ex.status, ex.error["code"]) == (404, -32601)


def test_missing_meta_is_invalid_params(mcp: McpHttp) -> None:
    ex = mcp.call("tools/list", {}, with_meta=False)
    assert (ex.status, ex.error["code"]) == (400, -32602)


def test_meta_without_capabilities_is_invalid_params(mcp: McpHttp) -> None:
    ex = mcp.call("tools/list", {"_meta": {PROTOCOL_VERSION_META_KEY: PROTOCOL_VERSION}})
    assert (ex.status, ex.error["code"]) == (400, -32602)
    assert "clientCapabilities" in ex.error["message"]


@pytest.mark.parametrize(
    ("method", "params", "headers"),
    [
        ("tools/list", {}, {"Mcp-Method": "prompts/list"}),
        ("tools/call", {"name": "link_accounts"}, {"Mcp-Name": "write_haiku"}),
    ],
)
def test_a_header_that_disagrees_with_the_body_is_a_mismatch(
    mcp: McpHttp, method: str, params: dict[str, object], headers: dict[str, str]
) -> None:
    ex = mcp.call(method, params, headers=headers, capabilities=ELICIT)
    assert (ex.status, ex.error["code"]) == (400, -32020)


def test_an_unsupported_protocol_version_lists_the_supported_ones(mcp: McpHttp) -> None:
    meta = {PROTOCOL_VERSION_META_KEY: "2099-01-01", CLIENT_CAPABILITIES_META_KEY: {}}
    ex = mcp.call("tools/list", {"_meta": meta}, headers={"MCP-Protocol-Version": "2099-01-01"})
    assert (ex.status, ex.error["code"]) == (400, -32022)
    assert ex.error["data"] == {"supported": [PROTOCOL_VERSION], "requested": "2099-01-01"}


def test_a_post_without_the_protocol_header_is_rejected_not_served_as_legacy(worker: WorkerSpec) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'
    response = httpx.post(f"{worker.url}/mcp", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020


@pytest.mark.parametrize("verb", ["GET", "DELETE"])
def test_legacy_stream_verbs_are_405(worker: WorkerSpec, verb: str) -> None:
    response = httpx.request(verb, f"{worker.url}/mcp", headers={"Accept": "text/event-stream"}, timeout=5)
    assert response.status_code == 405


def test_an_unknown_tool_is_an_error_result(mcp: McpHttp) -> None:
    ex = mcp.call("tools/call", {"name": "no_such_tool", "arguments": {}})
    assert ex.status == 200
    assert ex.result["isError"] is True
    assert "Unknown tool" in ex.result["content"][0]["text"]


def test_wrong_argument_types_are_an_error_result(mcp: McpHttp) -> None:
    ex = mcp.call("tools/call", {"name": "write_haiku", "arguments": {"topic": 5}}, capabilities={"sampling": {}})
    assert ex.result["isError"] is True


def test_a_missing_capability_is_32021_with_what_is_required(mcp: McpHttp) -> None:
    ex = mcp.call("tools/call", {"name": "link_accounts", "arguments": {}}, capabilities={"sampling": {}})
    assert (ex.status, ex.error["code"]) == (400, -32021)
    assert ex.error["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}


@pytest.mark.parametrize(
    ("params", "data"),
    [
        ({"name": "no_such_prompt"}, {"name": "no_such_prompt"}),
        (
            {"name": "onboarding", "arguments": {"tone": "warm"}},
            {"name": "onboarding", "missing": [], "unexpected": ["tone"]},
        ),
    ],
)
def test_an_unknown_prompt_or_argument_is_invalid_params_not_an_internal_error(
    mcp: McpHttp, params: dict[str, object], data: dict[str, object]
) -> None:
    """Found by the fuzz suite: the SDK answered both with -32603 and logged a traceback."""
    ex = mcp.call("prompts/get", params, capabilities=ELICIT)
    assert (ex.status, ex.error["code"]) == (400, -32602)
    assert ex.error["data"] == data


def _first_round(mcp: McpHttp) -> str:
    ex = mcp.call("tools/call", {"name": "link_accounts", "arguments": {}}, capabilities=ELICIT)
    assert ex.result["resultType"] == "input_required"
    state: str = ex.result["requestState"]
    return state


def test_input_responses_with_wrong_keys_are_asked_again(mcp: McpHttp) -> None:
    state = _first_round(mcp)
    wrong = {"other_login": {"action": "accept", "content": {"name": "octocat"}}}
    params = {"name": "link_accounts", "arguments": {}, "requestState": state, "inputResponses": wrong}
    ex = mcp.call("tools/call", params, capabilities=ELICIT)
    assert ex.result["resultType"] == "input_required"
    assert set(ex.result["inputRequests"]) == {"github_login"}


def test_an_answer_that_breaks_the_form_schema_is_asked_again(mcp: McpHttp) -> None:
    state = _first_round(mcp)
    invalid = {"github_login": {"action": "accept", "content": {"name": ""}}}  # minLength 1
    params = {"name": "link_accounts", "arguments": {}, "requestState": state, "inputResponses": invalid}
    ex = mcp.call("tools/call", params, capabilities=ELICIT)
    assert "github_login" in ex.result["inputRequests"]


@pytest.mark.parametrize("responses", [{"github_login": 5}, "not-a-map", {"github_login": {"action": "maybe"}}])
def test_malformed_input_responses_are_invalid_params(mcp: McpHttp, responses: object) -> None:
    state = _first_round(mcp)
    params = {"name": "link_accounts", "arguments": {}, "requestState": state, "inputResponses": responses}
    ex = mcp.call("tools/call", params, capabilities=ELICIT)
    assert (ex.status, ex.error["code"]) == (400, -32602)


def test_too_many_answers_are_refused_with_the_limit(mcp: McpHttp) -> None:
    state = _first_round(mcp)
    answers = {f"q{n}": {"action": "decline"} for n in range(17)}  # the default limit is 16
    params = {"name": "link_accounts", "arguments": {}, "requestState": state, "inputResponses": answers}
    ex = mcp.call("tools/call", params, capabilities=ELICIT)
    assert (ex.status, ex.error["code"]) == (400, -32602)
    assert ex.error["data"] == {"limit": "inputResponses", "max": 16, "got": 17}


def test_an_oversized_answer_is_refused_with_the_limit(mcp: McpHttp) -> None:
    state = _first_round(mcp)
    huge = {"github_login": {"action": "accept", "content": {"name": "x" * 20_000}}}
    params = {"name": "link_accounts", "arguments": {}, "requestState": state, "inputResponses": huge}
    ex = mcp.call("tools/call", params, capabilities=ELICIT)
    assert (ex.status, ex.error["code"]) == (400, -32602)
    assert ex.error["data"]["limit"] == "answerBytes"
    assert ex.error["data"]["got"] > ex.error["data"]["max"] == 16 * 1024


def test_answers_within_the_limits_still_complete_the_round(mcp: McpHttp) -> None:
    state = _first_round(mcp)
    fine = {"github_login": {"action": "accept", "content": {"name": "x" * 100}}}
    params = {"name": "link_accounts", "arguments": {}, "requestState": state, "inputResponses": fine}
    ex = mcp.call("tools/call", params, capabilities=ELICIT)
    assert set(ex.result["inputRequests"]) == {"google_login"}


def test_an_answer_with_a_lone_surrogate_is_measured_not_an_internal_error(mcp: McpHttp) -> None:
    """Found by the fuzz suite: measuring the answer's size raised on "\\ud800" (legal JSON), giving -32603."""
    state = _first_round(mcp)
    odd = {"github_login": {"action": "accept", "content": {"name": "\ud800"}}}
    params = {"name": "link_accounts", "arguments": {}, "requestState": state, "inputResponses": odd}
    ex = mcp.call("tools/call", params, capabilities=ELICIT)
    assert set(ex.result["inputRequests"]) == {"google_login"}


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "chunked"])
@pytest.mark.parametrize(("method", "params"), [("tools/list", {}), ("tools/call", {"name": "echo"})])
def test_an_oversized_body_is_413_and_the_worker_stays_up(
    worker: WorkerSpec, mcp: McpHttp, method: str, params: dict[str, str], declared: bool
) -> None:
    """On every /mcp path (`echo` takes the quiet tools' JSON path, which read any body whole before), with or
    without a declared length: HTTP 413 and a JSON-RPC error that names the limit."""
    body = encode_request(1, method, {**params, "_meta": request_meta({}), "padding": "x" * 2_000_000})
    content = body if declared else iter([body[i : i + 65536] for i in range(0, len(body), 65536)])
    response = httpx.post(f"{worker.url}/mcp", content=content, headers=request_headers(method, params))
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == -32600
    assert error["data"]["limit"] == "bodyBytes"
    assert error["data"]["max"] == 1024 * 1024
    assert error["data"].get("got") == (len(body) if declared else None)
    assert "request body too large" in error["message"]
    assert mcp.call("tools/list", {}).status == 200


@pytest.mark.parametrize(
    ("header", "value", "status"),
    [("Host", "evil.example:80", 421), ("Origin", "http://evil.example", 403)],
)
def test_foreign_hosts_and_origins_are_refused(worker: WorkerSpec, header: str, value: str, status: int) -> None:
    """DNS rebinding and cross-origin browser requests never reach a tool."""
    params = {"_meta": request_meta({})}
    body = encode_request(1, "tools/list", params)
    response = httpx.post(
        f"{worker.url}/mcp", content=body, headers=request_headers("tools/list", params, {header: value})
    )
    assert response.status_code == status
    assert "tools" not in response.text


def test_no_bad_input_above_left_a_traceback_or_stopped_the_worker(worker: WorkerSpec, log_dir: Path) -> None:
    assert httpx.get(f"{worker.url}/healthz").status_code == 200
    log = (log_dir / f"{worker.instance_id}.log").read_text()
    assert "Traceback" not in log
