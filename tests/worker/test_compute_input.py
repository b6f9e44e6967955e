"""Odd but valid input to the compute pack over real HTTP: an answer, never a tool that raised."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mrtr_worker.compute import hashchain
from tests.conftest import StartWorker
from tests.support.wire import McpHttp


@pytest.fixture(scope="module")
def mcp(start_worker: StartWorker) -> Iterator[McpHttp]:
    spec, _ = start_worker(tool_packs=("compute",))
    client = McpHttp(f"{spec.url}/mcp")
    yield client
    client.close()


@pytest.mark.parametrize("seed", ["\ud800", "a\udfffb", "\u00e9\u2603\U0001d54f", ""])
def test_any_json_string_is_a_seed_with_one_digest(mcp: McpHttp, seed: str) -> None:
    """Found by the fuzz suite: a lone surrogate (legal in JSON as an escape) made hash_chain raise."""
    ex = mcp.call("tools/call", {"name": "hash_chain", "arguments": {"seed": seed, "iterations": 3}})
    assert ex.result.get("isError") is not True, ex.result
    assert ex.result["structuredContent"] == {"digest": hashchain.reference(seed, 3), "iterations": 3}
