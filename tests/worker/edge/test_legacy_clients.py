"""2025-era clients get one clear answer from every pack: -32022 naming the version this fleet speaks.

The policy (README, "2025-era clients"): the fleet is stateless and speaks 2026-07-28 only. A request
naming a 2025-era version is refused at the edge with -32022 and `data: {supported, requested}` (the
2026-07-28 answer to any version a server does not serve), whatever it asks for; a request without the
version header gets -32020 as before. Before this policy such a request reached the SDK's legacy
transport: a computation ran to its end unshed, and an elicitation tool answered -32021, a 2026-only code.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mrtr_protocol import events
from mrtr_protocol.wire import PROTOCOL_VERSION
from tests.conftest import StartWorker
from tests.support.wire import McpHttp

ERA_2025 = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]

CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("compute: count_primes", "tools/call", {"name": "count_primes", "arguments": {"limit": 20_000, "segment": 1_000}}),
    ("compute: estimate_pi asks", "tools/call",
     {"name": "estimate_pi", "arguments": {"samples": 10, "ask_to_refine": True}}),
    ("demo: echo", "tools/call", {"name": "echo", "arguments": {"text": "hi"}}),
    ("demo: link_accounts", "tools/call", {"name": "link_accounts", "arguments": {}}),
    ("demo: onboarding prompt", "prompts/get", {"name": "onboarding"}),
    ("demo: report resource", "resources/read", {"uri": "mrtr://reports/42"}),
    ("conformance: simple text", "tools/call", {"name": "test_simple_text", "arguments": {}}),
    ("conformance: elicitation", "tools/call", {"name": "test_input_required_result_elicitation", "arguments": {}}),
    ("tools/list", "tools/list", {}),
    ("initialize", "initialize",
     {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}),
]  # fmt: skip

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def url(start_worker: StartWorker) -> str:
    spec, _ = start_worker(tool_packs=("demo", "compute", "conformance"), env={"MRTR_WORKER_MAX_SLICE_MS": "1"})
    return f"{spec.url}/mcp"


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as client:
        yield client


def _post(http: httpx.Client, url: str, method: str, params: dict[str, Any], headers: dict[str, str]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = http.post(url, content=json.dumps(body), headers={**HEADERS, **headers})
    message = events.response(response.headers.get("content-type", ""), response.content)
    assert message is not None, response.text[:300]
    return response.status_code, message


@pytest.mark.parametrize(("label", "method", "params"), CALLS, ids=[c[0] for c in CALLS])
def test_a_2025_11_25_request_is_refused_with_32022_by_every_pack(
    http: httpx.Client, url: str, label: str, method: str, params: dict[str, Any]
) -> None:
    status, message = _post(http, url, method, params, {"MCP-Protocol-Version": "2025-11-25"})
    assert status == 400, (label, message)
    assert "result" not in message, (label, message)
    assert message["error"]["code"] == -32022, (label, message)
    assert message["error"]["data"] == {"supported": [PROTOCOL_VERSION], "requested": "2025-11-25"}
    assert PROTOCOL_VERSION in message["error"]["message"]


@pytest.mark.parametrize("version", ERA_2025)
def test_every_2025_era_version_gets_the_same_answer(http: httpx.Client, url: str, version: str) -> None:
    status, message = _post(http, url, *CALLS[0][1:], {"MCP-Protocol-Version": version})
    assert (status, message["error"]["code"], message["error"]["data"]["requested"]) == (400, -32022, version)


def test_a_request_without_the_version_header_still_gets_32020(http: httpx.Client, url: str) -> None:
    status, message = _post(http, url, *CALLS[-1][1:], {})
    assert (status, message["error"]["code"]) == (400, -32020)


def test_the_same_calls_on_the_2026_wire_are_served(url: str) -> None:
    """The control: the refusal is about the version, not the calls."""
    mcp = McpHttp(url)
    try:
        assert mcp.call("tools/call", CALLS[0][2]).result["resultType"] == "input_required"  # 1 ms slices
        assert mcp.call("tools/call", CALLS[2][2]).result["structuredContent"] == {"text": "hi"}
        assert mcp.call("tools/call", CALLS[6][2]).result["resultType"] == "complete"
    finally:
        mcp.close()
