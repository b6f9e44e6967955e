"""A fleet-wide overload over real HTTP: two full workers, a new call refused at admission by one and, with the
fleet-full rule and `REFUSE_NEW_AFTER_MS`, refused as busy by the other: a valid JSON-RPC error (-32000, HTTP 200)
with a retry hint; nothing ran, and the same round sent again once a slot is free completes exactly."""

from __future__ import annotations

import threading
from contextlib import suppress
from functools import partial

import httpx
import pytest

from mrtr_ops.local.process import WorkerSpec
from mrtr_ops.metrics_page import MetricsPage
from mrtr_ops.waiting import wait_until
from mrtr_protocol.busy import SERVER_BUSY
from mrtr_protocol.rounds import ROUND_META_KEY
from mrtr_worker.compute.primes import KNOWN_COUNTS
from tests.conftest import McpTo, StartWorker
from tests.support.wire import McpHttp

ENV = {
    "MRTR_WORKER_MAX_CONCURRENT_COMPUTATIONS": "1",
    "MRTR_WORKER_FLEET_FULL_HOLD_MS": "600000",
    "MRTR_WORKER_REFUSE_NEW_AFTER_MS": "1",
    "MRTR_WORKER_MAX_SLICE_MS": "0",
}
LONG = {"limit": 2_000_000_000, "segment": 2_500_000}
"""Hundreds of steps: it holds the worker's one slot for the whole test."""
SMALL = {"limit": 1_000_000}


def _metric(spec: WorkerSpec, name: str) -> float:
    return MetricsPage.parse(httpx.get(f"{spec.url}/metrics", timeout=10).text).value(name)


@pytest.fixture
def full_pair(start_worker: StartWorker, mcp_to: McpTo) -> tuple[WorkerSpec, WorkerSpec]:
    """Two workers of one slot each, each with a round held here before (what the queue estimate needs), each
    busy with a long computation (left running: the workers stop with the module)."""
    pair = [start_worker(tool_packs=("demo", "compute"), env=ENV)[0] for _ in range(2)]
    for spec in pair:
        warm = mcp_to(spec).call("tools/call", {"name": "count_primes", "arguments": SMALL})
        assert warm.result["structuredContent"] == {"count": KNOWN_COUNTS[1_000_000]}
    for spec in pair:
        threading.Thread(target=_hold_the_slot, args=(mcp_to(spec),), daemon=True).start()
        wait_until(partial(_slot_taken, spec), timeout=30, what=f"{spec.instance_id}'s slot taken")
    return pair[0], pair[1]


def _slot_taken(spec: WorkerSpec) -> bool:
    return _metric(spec, "mrtr_worker_computations") == 1


def _hold_the_slot(mcp: McpHttp) -> None:
    with suppress(httpx.HTTPError, AssertionError):  # its client closes, or the worker stops, under it
        mcp.call("tools/call", {"name": "count_primes", "arguments": LONG})


def test_a_new_call_refused_by_one_full_worker_is_refused_as_busy_by_the_next(
    full_pair: tuple[WorkerSpec, WorkerSpec], mcp_to: McpTo, start_worker: StartWorker
) -> None:
    first, second = full_pair
    refused = mcp_to(first).call("tools/call", {"name": "count_primes", "arguments": SMALL})
    assert refused.result["resultType"] == "input_required"
    assert refused.result["_meta"][ROUND_META_KEY]["reason"] == "admission"
    state = refused.result["requestState"]

    retry = {"name": "count_primes", "arguments": SMALL, "requestState": state}
    busy = mcp_to(second).call("tools/call", retry)
    assert busy.status == 200
    assert busy.error["code"] == SERVER_BUSY
    assert busy.error["data"]["retryAfterMs"] >= 25
    assert busy.error["data"]["expectedWaitMs"] > 1
    assert "Nothing ran" in busy.error["message"]
    assert _metric(second, "mrtr_worker_busy_refusals_total") == 1
    assert _metric(first, "mrtr_worker_busy_refusals_total") == 0  # the first had no sign the fleet was full

    # Nothing ran for it, and the round the client holds is still good: where a slot is free, it completes.
    spare, _ = start_worker(tool_packs=("demo", "compute"), env=ENV)
    done = mcp_to(spare).call("tools/call", retry)
    assert done.result["structuredContent"] == {"count": KNOWN_COUNTS[1_000_000]}
