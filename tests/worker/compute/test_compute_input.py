"""Odd but valid input to the compute pack over real HTTP: an answer, never a tool that raised.

The worker runs 1 ms time slices, so a computation of a few steps must hand back. (A 2025-era request,
whose wire cannot say input_required, is refused at the edge: `test_legacy_clients.py`.)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mrtr_worker.compute import hashchain
from tests.conftest import StartWorker
from tests.support.wire import McpHttp


@pytest.fixture(scope="module")
def mcp(start_worker: StartWorker) -> Iterator[McpHttp]:
    spec, _ = start_worker(tool_packs=("compute",), env={"MRTR_WORKER_MAX_SLICE_MS": "1"})
    client = McpHttp(f"{spec.url}/mcp")
    yield client
    client.close()


@pytest.mark.parametrize("seed", ["\ud800", "a\udfffb", "\u00e9\u2603\U0001d54f", ""])
def test_any_json_string_is_a_seed_with_one_digest(mcp: McpHttp, seed: str) -> None:
    """Found by the fuzz suite: a lone surrogate (legal in JSON as an escape) made hash_chain raise."""
    ex = mcp.call("tools/call", {"name": "hash_chain", "arguments": {"seed": seed, "iterations": 3}})
    assert ex.result.get("isError") is not True, ex.result
    assert ex.result["structuredContent"] == {"digest": hashchain.reference(seed, 3), "iterations": 3}


PRIMES = {"name": "count_primes", "arguments": {"limit": 20_000, "segment": 1_000}}


def test_a_long_computation_hands_back_on_the_2026_wire(mcp: McpHttp) -> None:
    """The control for the test below: on this worker the computation does not fit in one slice."""
    assert mcp.call("tools/call", PRIMES).result["resultType"] == "input_required"
