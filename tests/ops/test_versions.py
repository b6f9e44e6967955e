"""Version skew: requests that visit v1, then v2, then v1 again; and a whole rolling upgrade under load."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest
from mcp.server.request_state import AESGCMRequestStateCodec

from mrtr_client import Client, ScriptedInputs
from mrtr_ops.fleet import admin_call
from mrtr_ops.local.cluster import LocalCluster
from mrtr_ops.local.fleet import LocalFleet
from mrtr_ops.upgrade.rolling import RollingUpgrade
from mrtr_protocol import events
from mrtr_worker.compute import primes
from mrtr_worker.sealing.keyring import KeyRing
from tests.ops.conftest import MakeCluster

LOGINS = {key: {"name": key.split("_")[0]} for key in ("github_login", "google_login", "microsoft_login")}


def _swap_to(cluster: LocalCluster, version: int) -> None:
    """Put a worker of `version` in rotation and drain every other one: the next round must land there."""
    old = list(cluster.workers)
    cluster.add_worker(version)
    for instance in old:
        cluster.drain_worker(instance)


class SwapBetweenRounds(ScriptedInputs):
    """Answers like ScriptedInputs, and between rounds changes which version serves the next one."""

    def __init__(self, cluster: LocalCluster, versions: list[int]) -> None:
        super().__init__(forms=dict(LOGINS))
        self._cluster = cluster
        self._versions = versions

    def answer(self, key: str, request: Any) -> Any:
        if self._versions:
            _swap_to(self._cluster, self._versions.pop(0))
        return super().answer(key, request)


SHORT_SLICES = {"MRTR_WORKER_MAX_SLICE_MS": "200", "MRTR_WORKER_MIN_SLICE_MS": "0"}
"""So a computation hands back after every few steps (the login scenarios compute nothing: slices do not touch them)."""


@pytest.fixture(scope="module")
def one_worker(make_cluster: MakeCluster) -> LocalCluster:
    """One proxy over one worker, shared by the version-skew scenarios: each swaps the worker out between rounds anyway.

    The tests run in the order that needs the fewest swaps: each starts on the version the one before ended on.
    """
    return make_cluster(workers=1, versions=(1,), worker_env=dict(SHORT_SLICES))


def _served_by(cluster: LocalCluster, version: int) -> LocalCluster:
    """The shared cluster with its one worker at `version` (swapped in if the last test left the other one)."""
    if [handle.spec.version for handle in cluster.workers.values()] != [version]:
        _swap_to(cluster, version)
    return cluster


def test_the_login_scenario_through_v1_v2_and_v1_again_asks_nothing_twice(one_worker: LocalCluster) -> None:
    cluster = _served_by(one_worker, 1)
    with Client(cluster.mcp_url, SwapBetweenRounds(cluster, [2, 1])) as client:
        done = client.call_tool("link_accounts")
    assert [hop.version for hop in done.trace.hops] == ["1", "2", "1"]
    # v1 asked GitHub; v2 (which would also want Microsoft) asked Google, the next missing one;
    # v1 then had every login it needs and completed without asking anything.
    assert [(q.key, q.round) for q in done.trace.questions] == [("github_login", 1), ("google_login", 2)]
    assert done.trace.reasked == []
    assert done.structured == {"linked": {"github_login": "github", "google_login": "google"}}


def test_a_computation_through_v1_v2_and_v1_again_is_exact_and_keeps_unknown_fields(one_worker: LocalCluster) -> None:
    cluster = _served_by(one_worker, 1)
    codec = AESGCMRequestStateCodec(KeyRing.parse(cluster.keyring_file.read_text()).sealing_order())
    swaps = [2, 1]
    states: list[dict[str, Any]] = []

    def between_rounds(response: httpx.Response) -> None:
        response.read()  # JSON, or an event stream (with keep-alive pings) when a round runs long
        message = events.response(response.headers.get("content-type", ""), response.content) or {}
        result = message.get("result", {})
        if result.get("resultType") != "input_required":
            return
        envelope = json.loads(codec.unseal(result["requestState"]))
        states.append(json.loads(envelope["s"]))
        if swaps:
            _swap_to(cluster, swaps.pop(0))

    http = httpx.Client(timeout=60, event_hooks={"response": [between_rounds]})
    limit, segment = 200_000_000, 2_500_000
    with Client(cluster.mcp_url, http=http) as client:
        done = client.call_tool("count_primes", {"limit": limit, "segment": segment})

    assert done.structured == {"count": primes.KNOWN_COUNTS[limit]}
    assert done.result["_meta"]["mrtr-cluster.dev/compute"]["steps"] == primes.total_steps(
        primes.initial({"limit": limit, "segment": segment})
    )
    versions = [hop.version for hop in done.trace.hops]
    assert versions[:3] == ["1", "2", "1"]
    assert all(state["fmt"] == 1 for state in states), "until the fleet contracts, v2 writes the v1 layout"
    assert "sealed_at" not in states[0]  # written by v1
    assert "sealed_at" in states[1]  # v2 stamps a field v1 does not know...
    assert states[2]["sealed_at"] == states[1]["sealed_at"]  # ...and v1 carries it forward untouched


def test_the_login_scenario_through_v2_v1_and_v2_again_collects_all_three(one_worker: LocalCluster) -> None:
    cluster = _served_by(one_worker, 2)
    with Client(cluster.mcp_url, SwapBetweenRounds(cluster, [1, 2])) as client:
        done = client.call_tool("link_accounts")
    assert [hop.version for hop in done.trace.hops] == ["2", "1", "2", "2"]
    assert [q.key for q in done.trace.questions] == ["github_login", "google_login", "microsoft_login"]
    assert done.trace.reasked == []
    assert done.structured == {"linked": {key: value["name"] for key, value in LOGINS.items()}}


def test_a_v1_worker_given_the_v2_layout_asks_the_client_to_start_again(one_worker: LocalCluster) -> None:
    cluster = _served_by(one_worker, 2)
    for worker in LocalFleet(cluster).workers():
        admin_call(worker, "POST", "/admin/state-format", write=2)  # contracted too early: a v1 comes back
    with Client(cluster.mcp_url, SwapBetweenRounds(cluster, [1])) as client:
        done = client.call_tool("link_accounts")
    reasons = [hop.reason for hop in done.trace.hops]
    assert "error" in reasons, "the v1 worker must refuse the v2 layout, not guess"
    assert done.structured == {"linked": {"github_login": "github", "google_login": "google"}}
    assert done.trace.hops[-1].version == "1"


# --- a whole rolling upgrade (and rollback) under load -----------------------------------------------------

TTL = 8
WORKERS = 2
"""Every one is replaced twice (upgrade, rollback) under load; two already keep one serving while the other drains."""


def _load(url: str, stop: threading.Event, results: list[Any], kind: str) -> None:
    with Client(url, ScriptedInputs(forms=dict(LOGINS))) as client:
        while not stop.is_set():
            try:
                if kind == "compute":
                    done = client.call_tool("count_primes", {"limit": 50_000_000, "segment": 2_500_000})
                    results.append(done.structured == {"count": primes.KNOWN_COUNTS[50_000_000]} or done)
                else:
                    done = client.call_tool("link_accounts")
                    results.append((not done.trace.reasked and bool(done.structured["linked"])) or done)
            except Exception as exc:
                results.append(exc)


def test_a_rolling_upgrade_and_rollback_with_key_rotation_under_load_lose_nothing(make_cluster: MakeCluster) -> None:
    env = {
        "MRTR_WORKER_STATE_TTL_SECONDS": str(TTL),
        "MRTR_WORKER_MAX_SLICE_MS": "300",
        "MRTR_WORKER_MIN_SLICE_MS": "50",
    }
    cluster = make_cluster(workers=WORKERS, versions=(1,), worker_env=env)
    fleet = LocalFleet(cluster)
    stop = threading.Event()
    results: list[Any] = []
    threads = [
        threading.Thread(target=_load, args=(cluster.mcp_url, stop, results, kind))
        for kind in ("compute", "compute", "login", "login")
    ]
    for thread in threads:
        thread.start()
    try:
        upgrade = RollingUpgrade(fleet, state_ttl=TTL, new_key="rotated")
        steps = upgrade.upgrade()
        after_upgrade = len(results)
        assert {w.version for w in fleet.workers()} == {2}
        states = [admin_call(w, "GET", "/admin/state") for w in fleet.workers()]
        assert {(s["write_format"], s["primary_key"], tuple(s["keys"])) for s in states} == {
            (2, "rotated", ("rotated",))
        }
        rollback = RollingUpgrade(fleet, state_ttl=TTL).rollback()
        assert {w.version for w in fleet.workers()} == {1}
    finally:
        stop.set()
        for thread in threads:
            thread.join(120)

    names = [step.name for step in steps]
    assert names[0] == "add-key"
    assert names[-3:] == ["contract-format", "promote-key", "retire-key"]
    assert sum(name.startswith("replace") for name in names) == WORKERS
    assert [s.name for s in rollback][:2] == ["expand-format", "wait-states"]
    failures = [r for r in results if r is not True]
    assert failures == []
    assert after_upgrade > 0, "load ran during the upgrade"
    assert len(results) > after_upgrade, "load ran during the rollback"
