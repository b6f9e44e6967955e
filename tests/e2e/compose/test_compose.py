"""The compose cluster, end to end through its published ports (run by `scripts/compose-e2e`).

Order matters: the stop test removes a worker, the scale test brings the fleet to five. The rolling
upgrade on compose under load is the walkthrough's (`walkthrough/test_console_live.py`, run after these).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import httpx
import pytest

from mrtr_client import AuthenticationFailed, CallResult, Client, ScriptedInputs
from mrtr_dev_issuer import DevIssuer
from mrtr_ops.lb_admin import LbAdmin
from mrtr_ops.waiting import wait_until
from mrtr_worker.compute.primes import KNOWN_COUNTS
from tests.e2e.compose.conftest import ServiceContainers, compose, container_ip
from tests.support.paths import ROOT

LOGINS = {"github_login": {"name": "octocat"}, "google_login": {"name": "octo"}}
PRIORITY_AFTER_HOPS = 4  # the workers' default: after this many hand-backs a request is not shed again
BALANCERS = pytest.mark.parametrize("balancer_url", ["lb", "haproxy"], indirect=True)


@BALANCERS
def test_an_elicitation_flow_of_several_rounds_completes(balancer_url: str, token: str) -> None:
    with Client(f"{balancer_url}/mcp", ScriptedInputs(forms=dict(LOGINS)), token=token) as client:
        done = client.call_tool("link_accounts")
    assert done.structured == {"linked": {"github_login": "octocat", "google_login": "octo"}}
    assert [q.key for q in done.trace.questions] == ["github_login", "google_login"]
    assert done.trace.reasked == []


@BALANCERS
def test_without_a_valid_token_nothing_gets_through(balancer_url: str, issuer: DevIssuer) -> None:
    for token in (None, issuer.mint("mallory", ttl_seconds=-120)):
        with Client(f"{balancer_url}/mcp", token=token) as client, pytest.raises(AuthenticationFailed) as caught:
            client.call_tool("echo", {"text": "let me in"})
        assert caught.value.http_status == 401


def test_a_state_sealed_for_one_user_is_refused_to_another_on_every_container(lb_url: str, issuer: DevIssuer) -> None:
    alice, bob = issuer.mint("alice"), issuer.mint("bob")
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "link_accounts",
    }

    def call(token: str, extra: dict[str, Any]) -> dict[str, Any]:
        params = {"name": "link_accounts", "arguments": {}, "_meta": meta, **extra}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        response = httpx.post(
            f"{lb_url}/mcp", json=body, headers={**headers, "Authorization": f"Bearer {token}"}, timeout=30
        )
        message: dict[str, Any] = response.json()
        return message

    state = call(alice, {})["result"]["requestState"]
    answers = {"github_login": {"action": "accept", "content": {"name": "octocat"}}}
    for _ in range(3):  # round robin: each retry lands on another container
        stolen = call(bob, {"requestState": state, "inputResponses": answers})
        assert "result" not in stolen
        assert stolen["error"]["message"] == "Invalid or expired requestState"
    assert call(alice, {"requestState": state, "inputResponses": answers})["result"]["resultType"] == "input_required"


def test_the_workers_admin_endpoints_want_the_operator_token(containers: ServiceContainers) -> None:
    worker = containers("worker")[0]
    url = f"http://{container_ip(worker)}:8000/admin/state"
    assert httpx.get(url, timeout=10).status_code == 401
    token = (ROOT / "secrets" / "admin-token").read_text().strip()
    assert httpx.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10).status_code == 200


def test_the_proxys_admin_is_on_its_unpublished_port_and_wants_the_token(
    lb_url: str, lb_admin_url: str, admin_token: str
) -> None:
    for path in ("/lb/backends", "/lb/healthz", "/lb/metrics"):
        assert httpx.get(f"{lb_url}{path}", timeout=10).status_code == 404, f"{path} on the published port"
    assert httpx.get(f"{lb_admin_url}/lb/backends", timeout=10).status_code == 401
    answer = httpx.get(f"{lb_admin_url}/lb/backends", headers={"Authorization": f"Bearer {admin_token}"}, timeout=10)
    assert answer.status_code == 200
    assert {entry["source"] for entry in answer.json()} == {"dns"}


@BALANCERS
def test_only_mcp_and_the_vault_pages_are_forwarded(balancer_url: str) -> None:
    """A worker's /admin, /metrics and probes are not reachable through either balancer; /mcp reaches a worker."""
    for path in ("/admin/state", "/admin/drain", "/metrics", "/readyz", "/healthz", "/lb/backends", "/"):
        assert httpx.get(f"{balancer_url}{path}", timeout=10).status_code == 404, path
    assert httpx.post(f"{balancer_url}/admin/drain", timeout=10).status_code == 404
    assert httpx.post(f"{balancer_url}/mcp", json={}, timeout=10).status_code == 401, "a worker wants a token"


@BALANCERS
def test_a_long_computation_hops_across_containers_and_is_right(balancer_url: str, token: str) -> None:
    with Client(f"{balancer_url}/mcp", token=token) as client:
        done = client.call_tool("count_primes", {"limit": 300_000_000})
    assert done.structured == {"count": 16_252_325}
    assert len(done.trace.instances) >= 2, done.trace.hops


def test_docker_stop_of_the_container_running_a_computation_loses_nothing(
    lb: LbAdmin, lb_url: str, containers: ServiceContainers, token: str
) -> None:
    limit = 1_000_000_000
    box: list[Any] = []
    hand_backs: list[int] = []
    settled = threading.Event()

    def count_hand_backs(response: httpx.Response) -> None:
        response.read()
        if b'"input_required"' not in response.content:
            return
        if b'"straggler"' in response.content:
            # Handed on by a straggler: the instance it lands on serves it like a prioritized round
            # (`mrtr_worker.compute.policy`), so it stays there until it ends or is drained. Not an ageing
            # hop either. (A fast machine's call then ended on that worker before the test looked.)
            settled.set()
            return
        hand_backs.append(1)
        if len(hand_backs) >= PRIORITY_AFTER_HOPS:
            settled.set()  # aged into priority: it now stays on one worker until it ends or is drained

    def call() -> None:
        try:
            http = httpx.Client(timeout=120, event_hooks={"response": [count_hand_backs]})
            with Client(f"{lb_url}/mcp", http=http, token=token) as client:
                box.append(client.call_tool("count_primes", {"limit": limit}))
        except Exception as exc:
            box.append(exc)
        settled.set()

    thread = threading.Thread(target=call)
    thread.start()
    assert settled.wait(60), "the computation never aged into priority nor left a straggler"
    busy: list[str] = []

    def computation_running() -> bool:
        if box:  # the call ended before it was seen in flight: say how, rather than wait the minute out
            raise AssertionError(f"the computation ended before a worker was seen running it: {box[0]!r}")
        busy[:] = [b["url"] for b in lb.backends() if b["in_flight"] > 0]
        return bool(busy)

    wait_until(computation_running, timeout=60, interval=0.1, what="a computation in flight")
    victim = next(c for c in containers("worker") if f"http://{container_ip(c)}:8000" == busy[0])
    victim.stop(timeout=30)  # SIGTERM: the worker drains, handing the computation back
    thread.join(180)
    done = box[0]
    assert isinstance(done, CallResult), done
    assert done.structured == {"count": KNOWN_COUNTS[limit]}
    drained = [hop for hop in done.trace.hops if hop.reason == "drain"]
    assert drained, done.trace.hops
    assert drained[0].instance is not None
    assert drained[0].instance.startswith(victim.short_id)
    assert done.trace.hops[-1].instance != drained[0].instance


def test_scaling_to_five_workers_is_picked_up_without_restarting_the_proxy(
    lb: LbAdmin, lb_url: str, containers: ServiceContainers, token: str
) -> None:
    (proxy,) = containers("lb")
    started_at = proxy.attrs["State"]["StartedAt"]
    compose("up", "-d", "--wait", "--no-recreate", "--scale", "worker=5", "worker")

    def five_in_rotation() -> bool:
        return sum(1 for b in lb.backends() if b["healthy"]) == 5

    wait_until(five_in_rotation, timeout=60, interval=0.1, what="five healthy backends in the proxy")
    seen = set()
    with httpx.Client() as http, Client(f"{lb_url}/mcp", http=http, token=token) as client:
        for n in range(15):
            done = client.call_tool("echo", {"text": str(n)})
            seen.add(done.trace.hops[-1].instance)
    assert len(seen) == 5
    proxy.reload()
    assert proxy.attrs["State"]["StartedAt"] == started_at, "the proxy must not have been restarted"


def test_the_locust_suite_runs_distributed_in_the_loadtest_profile() -> None:
    compose(
        "--profile", "loadtest", "up", "-d", "locust-master", "locust-worker", env={"MRTR_LOCUSTFILE": "locustfile.py"}
    )
    ui = f"http://127.0.0.1:{os.environ.get('MRTR_LOCUST_PORT', '8089')}"

    def stats() -> dict[str, Any]:
        try:
            body: dict[str, Any] = httpx.get(f"{ui}/stats/requests", timeout=5).json()
        except (httpx.HTTPError, ValueError):
            return {}
        return body

    wait_until(
        lambda: stats().get("worker_count") == 2,
        timeout=60,
        interval=0.1,
        what="the Locust master to see its two workers",
    )
    started = httpx.post(f"{ui}/swarm", data={"user_count": 4, "spawn_rate": 2, "host": "http://lb:8080"}, timeout=10)
    assert started.json()["success"] is True

    def summary() -> dict[str, Any]:
        body: dict[str, Any] = httpx.get(f"{ui}/mrtr/summary.json", timeout=5).json()
        return body

    try:
        wait_until(
            lambda: summary()["requests"] >= 20,
            timeout=120,
            interval=0.1,
            what="the workers' MRTR figures on the master",
        )
        figures = summary()
        errors = stats().get("errors", [])
    finally:
        httpx.post(f"{ui}/stop", timeout=10)
    assert figures["failures"] == 0, errors
    assert figures["wrong_answers"] == 0
    assert figures["reasked_questions"] == 0
    assert stats()["worker_count"] == 2
