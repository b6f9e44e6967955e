"""The official MCP Python SDK client (`mcp.Client`) drives flows against our worker over real HTTP."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from mrtr_ops.local.process import WorkerSpec
from tests.conftest import StartWorker


@pytest.fixture(scope="module")
def full_worker(start_worker: StartWorker) -> WorkerSpec:
    return start_worker(tool_packs=("demo", "conformance"))[0]


async def test_sdk_client_completes_the_login_elicitation_flow(full_worker: WorkerSpec) -> None:
    asked: list[str] = []

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        provider = params.message.removeprefix("Please provide your ").removesuffix(" username")
        return types.ElicitResult(action="accept", content={"name": f"{provider.lower()}-user"})

    async with Client(f"{full_worker.url}/mcp", mode="2026-07-28", elicitation_callback=elicit) as client:
        result = await client.call_tool("link_accounts", {})

    assert result.structured_content == {"linked": {"github_login": "github-user", "google_login": "google-user"}}
    assert sorted(asked) == ["Please provide your GitHub username", "Please provide your Google username"]


async def test_sdk_client_completes_a_three_round_flow(full_worker: WorkerSpec) -> None:
    rounds: list[str] = []

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        rounds.append(params.message)
        properties: dict[str, Any] = params.requested_schema["properties"]  # type: ignore[union-attr]
        return types.ElicitResult(action="accept", content={name: "blue" for name in properties})

    async with Client(f"{full_worker.url}/mcp", mode="2026-07-28", elicitation_callback=elicit) as client:
        result = await client.call_tool("test_input_required_result_multi_round", {})

    assert result.is_error is False
    assert len(rounds) == 2  # two questions, three requests: the third completes


async def test_sdk_client_discovers_the_worker(full_worker: WorkerSpec) -> None:
    async with Client(f"{full_worker.url}/mcp", mode="auto") as client:
        tools = await client.list_tools()
    assert "link_accounts" in {tool.name for tool in tools.tools}
