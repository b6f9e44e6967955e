"""Capabilities are checked on every round, not only the first: a retry may declare less than the call that started.

Each case starts a call with the capabilities it needs, takes the first question, then retries with the
question's state but capabilities that no longer allow it. The worker must answer -32021 with the
capability in `requiredCapabilities`, as a first round without it does, and never send the retry an
input request of a kind it did not declare (MCP 2026-07-28: "Capabilities MUST NOT be inferred from
earlier requests").
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import ClientCapabilities

from mrtr_worker.sealing.layout import StateLayout
from mrtr_worker.tool_api import inputs
from mrtr_worker.tool_api.rounds import Round, WorkerInstance
from tests.conftest import StartWorker
from tests.support.wire import Exchange, McpHttp

ALL: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
WITHOUT_FORMS: dict[str, Any] = {"sampling": {}, "roots": {}, "elicitation": {"url": {}}}
WITHOUT_SAMPLING: dict[str, Any] = {"elicitation": {}, "roots": {}}
WITHOUT_ROOTS: dict[str, Any] = {"elicitation": {}, "sampling": {}}

CASES: list[tuple[str, str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    # (label, method, params, the retry's capabilities, the requiredCapabilities expected)
    ("compute: estimate_pi's refine question", "tools/call",
     {"name": "estimate_pi", "arguments": {"samples": 2_000, "seed": 3, "ask_to_refine": True, "chunk": 1_000}},
     WITHOUT_FORMS, {"elicitation": {"form": {}}}),
    ("demo: link_accounts", "tools/call", {"name": "link_accounts", "arguments": {}},
     WITHOUT_FORMS, {"elicitation": {"form": {}}}),
    ("demo: write_haiku", "tools/call", {"name": "write_haiku", "arguments": {"topic": "rain"}},
     WITHOUT_SAMPLING, {"sampling": {}}),
    ("demo: scan_roots", "tools/call", {"name": "scan_roots", "arguments": {}}, WITHOUT_ROOTS, {"roots": {}}),
    ("demo: onboarding prompt", "prompts/get", {"name": "onboarding", "arguments": {}},
     WITHOUT_FORMS, {"elicitation": {"form": {}}}),
    ("demo: report resource", "resources/read", {"uri": "mrtr://reports/42"},
     WITHOUT_FORMS, {"elicitation": {"form": {}}}),
    ("conformance: elicitation", "tools/call", {"name": "test_input_required_result_elicitation", "arguments": {}},
     WITHOUT_FORMS, {"elicitation": {"form": {}}}),
    ("conformance: sampling", "tools/call", {"name": "test_input_required_result_sampling", "arguments": {}},
     WITHOUT_SAMPLING, {"sampling": {}}),
    ("conformance: roots", "tools/call", {"name": "test_input_required_result_list_roots", "arguments": {}},
     WITHOUT_ROOTS, {"roots": {}}),
    ("conformance: multi round", "tools/call", {"name": "test_input_required_result_multi_round", "arguments": {}},
     WITHOUT_FORMS, {"elicitation": {"form": {}}}),
]  # fmt: skip


@pytest.fixture(scope="module")
def mcp(start_worker: StartWorker) -> Iterator[McpHttp]:
    spec, _ = start_worker(tool_packs=("demo", "compute", "conformance"), env={"MRTR_WORKER_MAX_SLICE_MS": "0"})
    client = McpHttp(f"{spec.url}/mcp")
    yield client
    client.close()


def _first_question(mcp: McpHttp, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The first round that asks something (hand-backs without questions are retried at once)."""
    exchange = mcp.call(method, params, capabilities=ALL)
    for _ in range(50):
        result = exchange.result
        assert result.get("resultType") == "input_required", result
        if result.get("inputRequests"):
            return result
        exchange = mcp.call(method, {**params, "requestState": result["requestState"]}, capabilities=ALL)
    raise AssertionError(f"{params} never asked a question")


def _kinds(exchange: Exchange) -> list[str]:
    result = exchange.message.get("result") or {}
    return [request["method"] for request in (result.get("inputRequests") or {}).values()]


@pytest.mark.parametrize(("label", "method", "params", "retry_caps", "required"), CASES, ids=[c[0] for c in CASES])
def test_a_retry_that_dropped_the_capability_gets_32021_never_the_question(
    mcp: McpHttp, label: str, method: str, params: dict[str, Any], retry_caps: dict[str, Any], required: dict[str, Any]
) -> None:
    asked = _first_question(mcp, method, params)
    retry = mcp.call(method, {**params, "requestState": asked["requestState"]}, capabilities=retry_caps)
    assert _kinds(retry) == [], f"{label}: sent {_kinds(retry)} to a retry that declared {retry_caps}"
    assert retry.status == 400, retry.message
    assert retry.error["code"] == -32021, retry.message
    assert retry.error["data"]["requiredCapabilities"] == required


def test_a_retry_that_keeps_the_capability_is_asked_again(mcp: McpHttp) -> None:
    """The control: the same retry with the capability still declared is asked the pending question again."""
    method, params = CASES[0][1], CASES[0][2]
    asked = _first_question(mcp, method, params)
    retry = mcp.call(method, {**params, "requestState": asked["requestState"]}, capabilities=ALL)
    assert list(retry.result["inputRequests"]) == ["refine"]


def test_an_answer_carried_by_a_retry_without_the_capability_is_used(mcp: McpHttp) -> None:
    """Nothing is sent to the client then, so nothing needs the capability: the computation completes."""
    method, params = CASES[0][1], CASES[0][2]
    asked = _first_question(mcp, method, params)
    answer = {"refine": {"action": "accept", "content": {"refine": False}}}
    retry_params = {**params, "requestState": asked["requestState"], "inputResponses": answer}
    exchange = mcp.call(method, retry_params, capabilities={})
    for _ in range(50):
        if exchange.result.get("resultType") != "input_required":
            break
        assert _kinds(exchange) == [], exchange.result
        exchange = mcp.call(method, {**params, "requestState": exchange.result["requestState"]}, capabilities={})
    assert exchange.result["structuredContent"]["samples"] == 2_000


NEEDS = [
    (inputs.form("Name?", {"name": {"type": "string"}}), {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
    (inputs.url_elicitation("Open", "https://example.com/x"), {"elicitation": {}}, {"elicitation": {"url": {}}}),
    (inputs.sampling("Say hi", max_tokens=5), {"roots": {}}, {"sampling": {}}),
    (inputs.roots(), {"sampling": {}}, {"roots": {}}),
]


@pytest.mark.parametrize(("request_wire", "declared", "required"), NEEDS, ids=["form", "url", "sampling", "roots"])
def test_round_ask_never_sends_a_kind_this_request_did_not_declare(
    request_wire: inputs.InputRequestWire, declared: dict[str, Any], required: dict[str, Any]
) -> None:
    """The net under every handler: `Round.ask` itself refuses, whatever the tool checked before."""
    ctx = SimpleNamespace(
        client_capabilities=ClientCapabilities.model_validate(declared),
        input_responses=None,
        protocol_version="2026-07-28",
        request_state=None,
    )
    rnd = Round(cast(Any, ctx), WorkerInstance("w-test", 1, StateLayout(1)))
    with pytest.raises(MCPError) as raised:
        rnd.ask({"q": request_wire}, {})
    assert raised.value.error.code == -32021
    assert raised.value.error.data == {"requiredCapabilities": required}
    assert rnd.trace.hops == 0  # nothing was sealed or recorded


def test_round_ask_sends_what_this_request_declared() -> None:
    ctx = SimpleNamespace(
        client_capabilities=ClientCapabilities.model_validate(ALL),
        input_responses=None,
        protocol_version="2026-07-28",
        request_state=None,
    )
    rnd = Round(cast(Any, ctx), WorkerInstance("w-test", 1, StateLayout(1)))
    asked = rnd.ask({f"q{i}": wire for i, (wire, _, _) in enumerate(NEEDS)}, {})
    assert asked.input_requests is not None
    assert len(asked.input_requests) == len(NEEDS)
