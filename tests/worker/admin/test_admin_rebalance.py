"""`POST /admin/rebalance` on a real worker: the operator's word that capacity was added elsewhere.

Its answer (`mrtr_protocol.fleet`) counts the calls that left the queue, not those waiting in it, so it is
checked on a worker that has one: one compute slot held by a long computation, calls queued behind it. Each
rebalance moves them (handed back, their retries queue again) until their budget of moves is spent; then they
wait, and the answer says nothing moved while the queue is as long as before.
"""

from __future__ import annotations

import asyncio
from functools import partial

import httpx
import pytest

from mrtr_client import AsyncClient, CallResult
from mrtr_ops.local.process import WorkerSpec
from mrtr_ops.metrics_page import MetricsPage
from mrtr_ops.waiting import wait_until_async
from mrtr_protocol.fleet import READINESS_PATH, REBALANCE_PATH, moved_by
from mrtr_worker.compute import primes
from mrtr_worker.compute.policy import SheddingSettings
from tests.conftest import StartWorker

QUEUED = 2
MOVES = SheddingSettings().straggler_budget
"""Moves a call may make (off a straggler, out of a queue): the rebalances that move it."""
ENDLESS = {"limit": primes.MAX_LIMIT, "segment": 10_000}
"""200,000 short steps (a minute or more): it holds the slot for the whole test, and a stop ends it at once."""
ONE_SLOT_AND_A_QUEUE = {
    "MRTR_WORKER_MAX_CONCURRENT_COMPUTATIONS": "1",
    "MRTR_WORKER_PRIORITY_AFTER_HOPS": "1",  # shed once at admission, a call queues for the slot on its retry
    "MRTR_WORKER_MIN_SLICE_MS": "3600000",  # the call holding the slot keeps it, queue or not
    "MRTR_WORKER_MAX_SLICE_MS": "0",
    "MRTR_WORKER_STRAGGLER_RATIO": "0",  # nor does a dip in its own pace move it
}


def test_an_idle_worker_moves_nothing_and_stays_in_service(worker: WorkerSpec) -> None:
    response = httpx.post(f"{worker.url}{REBALANCE_PATH}", timeout=10)
    assert response.status_code == 200, response.text
    assert moved_by(response.json()) == 0
    assert httpx.get(f"{worker.url}{READINESS_PATH}", timeout=10).status_code == 200  # not a drain


class _Gauges:
    def __init__(self, url: str, http: httpx.AsyncClient) -> None:
        self._url, self._http = url, http

    async def page(self) -> MetricsPage:
        return MetricsPage.parse((await self._http.get(f"{self._url}/metrics")).text)

    async def holding(self) -> bool:
        return (await self.page()).value("mrtr_worker_computations") == 1

    async def queue_after(self, pressure: float) -> bool:
        """The queue is full again once `pressure` hand-backs were counted (the moved calls came back)."""
        page = await self.page()
        handed_back = page.value("mrtr_worker_input_required_total", reason="pressure")
        return handed_back == pressure and page.value("mrtr_worker_queued_computations") == QUEUED


@pytest.mark.slow
async def test_a_rebalance_answers_the_calls_it_moved_not_those_waiting(start_worker: StartWorker) -> None:
    spec, process = start_worker(tool_packs=("compute",), env=ONE_SLOT_AND_A_QUEUE)
    try:
        async with AsyncClient(f"{spec.url}/mcp") as mcp, httpx.AsyncClient(timeout=10) as http:
            gauges = _Gauges(spec.url, http)
            holder = asyncio.create_task(mcp.call_tool("count_primes", ENDLESS))
            await wait_until_async(gauges.holding, timeout=60, what="the long call holding the only slot")
            queued: list[asyncio.Task[CallResult]] = [
                asyncio.create_task(mcp.call_tool("count_primes", {"limit": 1000})) for _ in range(QUEUED)
            ]
            answers = []
            for rebalance in range(MOVES + 1):
                full_again = partial(gauges.queue_after, QUEUED * rebalance)
                await wait_until_async(full_again, timeout=60, what=f"the queue before rebalance {rebalance + 1}")
                answer = await http.post(f"{spec.url}{REBALANCE_PATH}")
                assert answer.status_code == 200, answer.text
                answers.append(moved_by(answer.json()))

            assert answers == [QUEUED] * MOVES + [0]  # the last found them queued, with no move left: they stay
            assert (await gauges.page()).value("mrtr_worker_queued_computations") == QUEUED
            assert not holder.done()  # the call holding the slot is no queued call: it stays
            for task in (holder, *queued):
                task.cancel()
            await asyncio.gather(holder, *queued, return_exceptions=True)
    finally:
        process.stop()
