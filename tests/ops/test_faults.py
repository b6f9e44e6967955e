"""Each fault of the chaos run on its own, on a real local cluster: the call in flight still completes.

A worker paused (SIGSTOP) or cut off (its cable cut) while it computes
answers nothing; the proxy gives up on it after its failed health probes
(504), the client retries with its last requestState and another worker
finishes. A worker killed and restarted comes back as a new process under
the same identity and serves again.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import httpx
import pytest

from mrtr_client import CallResult, Client
from mrtr_ops.chaos.fleet import LocalChaosFleet
from mrtr_ops.chaos.watch import HandBackMeter
from mrtr_ops.local.cluster import LocalCluster
from mrtr_ops.waiting import wait_until
from mrtr_worker.compute import primes
from tests.ops.conftest import settle

LIMIT = 200_000_000
SEGMENT = 2_500_000


@pytest.fixture
def cabled(cabled_cluster: LocalCluster) -> LocalCluster:
    """The shared cluster as each test expects it: three workers in rotation, none paused, cut or computing."""
    settle(cabled_cluster, workers=3)
    return cabled_cluster


def _call_in_thread(cluster: LocalCluster) -> tuple[threading.Thread, list[Any]]:
    box: list[Any] = []

    def call() -> None:
        try:
            with Client(cluster.mcp_url) as client:
                box.append(client.call_tool("count_primes", {"limit": LIMIT, "segment": SEGMENT}))
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    return thread, box


def _computing_worker(cluster: LocalCluster, timeout: float = 20.0) -> str:
    def computing() -> str | None:
        return next(
            (i for i in list(cluster.workers) if cluster.worker_metric(i, "mrtr_worker_computations") >= 1), None
        )

    return wait_until(computing, timeout=timeout, interval=0.01, what="a computation to start")


def _backend(cluster: LocalCluster, instance: str) -> dict[str, Any]:
    url = cluster.workers[instance].lb_url
    entry = cluster.lb.backend(url)
    assert entry is not None, f"{url} is not in the proxy's pool"
    return entry


def _finished_elsewhere(thread: threading.Thread, box: list[Any], victim: str) -> CallResult:
    thread.join(120)
    done = box[0]
    assert isinstance(done, CallResult), done
    assert done.structured == {"count": primes.KNOWN_COUNTS[LIMIT]}
    abandoned = [hop for hop in done.trace.hops if hop.reason == "transport"]
    assert [hop.http_status for hop in abandoned] == [504], "the proxy gave up on the silent worker once"
    hops = done.trace.hops
    after = hops[hops.index(abandoned[0]) + 1 :]
    assert after, "the call went on after the abandoned round"
    assert after[0].instance != victim, "the retry went to another worker"
    return done


def test_a_paused_worker_holds_no_request(cabled: LocalCluster) -> None:
    thread, box = _call_in_thread(cabled)
    victim = _computing_worker(cabled)
    pid = cabled.workers[victim].process.pid
    abandoned = _backend(cabled, victim)["abandoned"]  # the shared cluster's proxy may have given up on it before
    cabled.pause_worker(victim)
    try:
        wait_until(
            lambda: _backend(cabled, victim)["abandoned"] >= abandoned + 1,
            timeout=20,
            interval=0.02,
            what="the proxy to abandon the paused worker",
        )
        _finished_elsewhere(thread, box, victim)
    finally:
        cabled.resume_worker(victim)
    cabled.lb.wait_for_backend(cabled.workers[victim].lb_url)
    assert cabled.workers[victim].process.pid == pid, "the same process, paused and resumed"


def test_a_worker_cut_off_runs_on_and_its_request_completes_elsewhere(cabled: LocalCluster) -> None:
    thread, box = _call_in_thread(cabled)
    victim = _computing_worker(cabled)
    handle = cabled.workers[victim]
    cabled.cut_worker(victim)
    try:
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{handle.lb_url}/readyz", timeout=2)  # the proxy's way in is gone
        assert httpx.get(f"{handle.url}/healthz", timeout=2).status_code == 200  # the worker itself is alive
        _finished_elsewhere(thread, box, victim)
        assert not _backend(cabled, victim)["healthy"]
    finally:
        cabled.restore_worker(victim)
    cabled.lb.wait_for_backend(handle.lb_url)
    assert handle.process.running


def test_a_killed_worker_restarts_as_a_new_process_and_serves(cabled: LocalCluster) -> None:
    victim = list(cabled.workers)[1]  # the shared cluster's second worker (a drained w2 was replaced by another)
    old_pid = cabled.workers[victim].process.pid
    cabled.kill_worker(victim)
    with pytest.raises(ProcessLookupError):
        os.kill(old_pid, 0)
    with Client(cabled.mcp_url) as client:  # the fleet serves meanwhile
        assert client.call_tool("echo", {"text": "still here"}).structured == {"text": "still here"}

    cabled.restart_worker(victim)
    assert cabled.workers[victim].process.pid != old_pid

    def served_by_victim() -> bool:
        with Client(cabled.mcp_url) as client:
            return client.call_tool("echo", {"text": "x"}).trace.instances == [victim]

    wait_until(served_by_victim, timeout=20, interval=0.02, what="the restarted worker to serve a request")
    assert cabled.worker_metric(victim, "mrtr_worker_requests_total", method="tools/call", outcome="complete") >= 1


def test_the_hand_back_meter_counts_from_its_start_and_keeps_a_killed_workers_count(cabled: LocalCluster) -> None:
    fleet = LocalChaosFleet(cabled)
    arguments = {"limit": 100_000_000, "segment": SEGMENT}
    with Client(cabled.mcp_url) as client:
        before = client.call_tool("count_primes", arguments)  # hand-backs the meter must not count
        meter = HandBackMeter(fleet, interval=0.1).start()
        try:
            assert sum(meter.totals().values()) == 0
            done = client.call_tool("count_primes", arguments)
            meter.scrape_now()
            counted = meter.totals()
            slices = [hop.instance for hop in done.trace.hops if hop.reason == "slice"]
            assert slices, "a computation of this size hops on its time slices"
            assert any(hop.reason == "slice" for hop in before.trace.hops)
            assert counted["slice"] == len(slices)

            victim = slices[0]
            assert victim is not None
            fleet.kill9(victim)
            fleet.restart(victim)
            meter.scrape_now()
            assert meter.totals() == counted, "the killed process's hand-backs are kept; the new one starts at 0"
        finally:
            meter.stop()
