"""Long computations through the proxy over three workers: they hop, and every answer and step count is exact."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest

from mrtr_client import AsyncClient, CallResult, Client, ScriptedInputs
from mrtr_ops.local.cluster import LocalCluster
from mrtr_ops.waiting import wait_until
from mrtr_protocol.rounds import HAND_BACK_REASONS, EndOfRound
from mrtr_worker.compute import hashchain, montecarlo, primes
from mrtr_worker.compute.computation import run_uninterrupted
from tests.ops.conftest import FAST_SLICES, MakeCluster, settle

LIMIT = 100_000_000
SEGMENT = 2_500_000  # 40 steps of ~20 ms: several time slices


def expected_steps(limit: int, segment: int) -> int:
    return primes.total_steps(primes.initial({"limit": limit, "segment": segment}))


def steps_executed(cluster: LocalCluster, tool: str) -> float:
    return sum(cluster.worker_metric(i, "mrtr_worker_compute_steps_total", tool=tool) for i in cluster.workers)


async def _count_primes(client: AsyncClient, limit: int, segment: int = SEGMENT) -> CallResult:
    return await client.call_tool("count_primes", {"limit": limit, "segment": segment})


@pytest.fixture(scope="module")
def busy(make_cluster: MakeCluster) -> LocalCluster:
    """One computation slot per worker and short slices: load sheds early and often."""
    return make_cluster(worker_env={**FAST_SLICES, "MRTR_WORKER_MAX_CONCURRENT_COMPUTATIONS": "1"})


async def test_under_load_computations_hop_and_every_step_runs_exactly_once(busy: LocalCluster) -> None:
    before = steps_executed(busy, "count_primes")
    limits = [LIMIT, 50_000_000, LIMIT, 50_000_000, LIMIT, 50_000_000]
    async with AsyncClient(busy.mcp_url) as client:
        results = await asyncio.gather(*(_count_primes(client, limit) for limit in limits))

    for limit, done in zip(limits, results, strict=True):
        assert done.structured == {"count": primes.KNOWN_COUNTS[limit]}
        assert done.result["_meta"]["mrtr-cluster.dev/compute"]["steps"] == expected_steps(limit, SEGMENT)
    assert max(len(done.trace.instances) for done in results) >= 2
    reasons = {hop.reason for done in results for hop in done.trace.hops}
    assert reasons & set(HAND_BACK_REASONS), reasons
    executed = steps_executed(busy, "count_primes") - before
    assert executed == sum(expected_steps(limit, SEGMENT) for limit in limits)


async def test_a_saturated_cluster_makes_clients_back_off_and_loses_nothing(busy: LocalCluster) -> None:
    before = steps_executed(busy, "count_primes")
    calls = 12
    async with AsyncClient(busy.mcp_url) as client:
        results = await asyncio.gather(*(_count_primes(client, 20_000_000, 1_000_000) for _ in range(calls)))

    assert all(done.structured == {"count": primes.KNOWN_COUNTS[20_000_000]} for done in results)
    assert any(hop.reason == "admission" for done in results for hop in done.trace.hops)
    assert steps_executed(busy, "count_primes") - before == calls * expected_steps(20_000_000, 1_000_000)
    for done in results:
        moves = sum(hop.reason == EndOfRound.STRAGGLER for hop in done.trace.hops)  # for its own good: not ageing
        shed = sum(hop.reason in HAND_BACK_REASONS for hop in done.trace.hops) - moves
        assert shed <= 4, "a request past priority_after_hops (4) must not be shed again"
        assert moves <= 3, "straggler moves are bounded per request (straggler_budget)"
        assert len(done.trace.hops) <= 10, "clients with the SDK's 10-round cap must still finish"


async def test_other_state_shapes_resume_exactly(busy: LocalCluster) -> None:
    chain_args = {"seed": "mrtr", "iterations": 1_500_000, "chunk": 100_000}
    pi_args = {"samples": 400_000, "seed": 42, "chunk": 40_000}
    async with AsyncClient(busy.mcp_url) as client:
        chain, pi = await asyncio.gather(
            client.call_tool("hash_chain", chain_args), client.call_tool("estimate_pi", pi_args)
        )
    assert chain.structured["digest"] == hashchain.reference("mrtr", 1_500_000)
    assert pi.structured == run_uninterrupted(montecarlo.ESTIMATE_PI, pi_args)[0]
    assert len(chain.trace.hops) > 1


async def test_a_computation_asks_midway_and_the_answer_travels_with_its_state(busy: LocalCluster) -> None:
    args = {"samples": 200_000, "seed": 7, "chunk": 40_000, "ask_to_refine": True}
    async with AsyncClient(busy.mcp_url, ScriptedInputs(forms={"refine": {"refine": True}})) as client:
        done = await client.call_tool("estimate_pi", args)
    assert [q.key for q in done.trace.questions] == ["refine"]
    reference = run_uninterrupted(montecarlo.ESTIMATE_PI, {**args, "ask_to_refine": False, "samples": 400_000})[0]
    assert done.structured == reference


def test_health_and_short_calls_are_answered_while_computations_run(busy: LocalCluster) -> None:
    """Ordering, not timing: short requests complete while long ones are still computing."""
    finished = threading.Event()

    def long_call() -> None:
        with Client(busy.mcp_url) as client:
            client.call_tool("count_primes", {"limit": 300_000_000, "segment": SEGMENT})
        finished.set()

    worker = threading.Thread(target=long_call)
    worker.start()
    try:
        _wait_for_running_computation(busy)
        with Client(busy.mcp_url) as client:
            for n in range(5):
                assert client.call_tool("echo", {"text": str(n)}).structured == {"text": str(n)}
        for handle in busy.workers.values():
            assert httpx.get(f"{handle.url}/healthz").status_code == 200
        assert not finished.is_set(), "the long call should still be running"
    finally:
        worker.join()


def _wait_for_running_computation(cluster: LocalCluster, timeout: float = 20.0) -> str:
    def computing() -> str | None:
        return next(
            (i for i in list(cluster.workers) if cluster.worker_metric(i, "mrtr_worker_computations") >= 1), None
        )

    return wait_until(computing, timeout=timeout, interval=0.02, what="a computation to start")


# --- failures ----------------------------------------------------------------------------------------------


@pytest.fixture
def calm(cabled_cluster: LocalCluster) -> LocalCluster:
    """The session's cabled cluster (test_faults' too), made whole again first: a test before killed or drained."""
    settle(cabled_cluster, workers=3)
    return cabled_cluster


def _run_in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    box: list[Any] = []

    def target() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, box


def test_kill_9_of_the_worker_running_a_computation_loses_nothing(calm: LocalCluster) -> None:
    limit = 200_000_000

    def call() -> CallResult:
        with Client(calm.mcp_url) as client:
            return client.call_tool("count_primes", {"limit": limit, "segment": SEGMENT})

    thread, box = _run_in_thread(call)
    victim = _wait_for_running_computation(calm)
    calm.kill_worker(victim)
    thread.join(120)
    done = box[0]
    assert isinstance(done, CallResult), done
    assert done.structured == {"count": primes.KNOWN_COUNTS[limit]}
    assert victim not in done.trace.instances[-1:], "the answer came from a live worker"
    lost = [hop for hop in done.trace.hops if hop.reason == "transport"]
    assert lost, "the round on the killed worker should have failed"
    assert lost[0].http_status == 502, "the proxy reports the broken exchange; the client resumed from its last state"


def test_draining_a_worker_hands_its_computations_to_the_others(calm: LocalCluster) -> None:
    limit = 200_000_000
    calls = [
        _run_in_thread(lambda: Client(calm.mcp_url).call_tool("count_primes", {"limit": limit, "segment": SEGMENT}))
        for _ in range(4)
    ]
    victim = _wait_for_running_computation(calm)
    process = calm.workers[victim].process
    calm.drain_worker(victim)
    assert process.returncode() == 0
    results = []
    for thread, box in calls:
        thread.join(120)
        results.append(box[0])
    assert all(isinstance(done, CallResult) for done in results), results
    assert all(done.structured == {"count": primes.KNOWN_COUNTS[limit]} for done in results)
    drained = [hop for done in results for hop in done.trace.hops if hop.reason == "drain"]
    assert drained, "the drained worker should have handed at least one computation back"
    assert {hop.instance for hop in drained} == {victim}
