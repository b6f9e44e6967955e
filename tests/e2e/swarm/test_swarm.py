"""The swarm recipe, end to end on the local swarm (run by `scripts/swarm-e2e`).

Order matters: the last test rolls the workers to version 2 (and back with
MRTR_SWARM_ROLLBACK=1) under distributed Locust load.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest

from mrtr_client import AuthenticationFailed, Client, ScriptedInputs
from mrtr_ops.swarm.stack import POLL_SECONDS, SwarmStack
from mrtr_ops.swarm.walkthrough import CLUSTER_FILES, LOADTEST_FILES, MONITORING_FILES, Options, in_rotation, run
from mrtr_ops.waiting import wait_until
from tests.support.paths import ROOT

LOGINS = {"github_login": {"name": "octocat"}, "google_login": {"name": "octo"}}
SECOND = 1_000_000_000  # the Docker API's durations are nanoseconds


def test_docker_stack_config_accepts_the_recipes_files() -> None:
    env = {**os.environ, "MRTR_SWARM_OUT": "/tmp"}  # the headless file needs an absolute directory
    for files in (CLUSTER_FILES, LOADTEST_FILES, MONITORING_FILES):
        args = [arg for file in files for arg in ("-c", file)]
        done = subprocess.run(["docker", "stack", "config", *args], cwd=ROOT, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_the_services_run_with_the_declared_rolling_update(stack: SwarmStack) -> None:
    worker = stack.spec("worker")
    update: dict[str, Any] = worker["UpdateConfig"]
    assert (update["Order"], update["Parallelism"], update["FailureAction"]) == ("start-first", 1, "rollback")
    assert update["Monitor"] >= 10 * SECOND
    rollback: dict[str, Any] = worker["RollbackConfig"]
    assert (rollback["Order"], rollback["Parallelism"]) == ("start-first", 1)
    task: dict[str, Any] = worker["TaskTemplate"]
    assert task["ContainerSpec"]["StopGracePeriod"] == 30 * SECOND
    assert worker["EndpointSpec"] == {"Mode": "dnsrr"}
    lb: dict[str, Any] = stack.spec("lb")["EndpointSpec"]
    assert [(p["PublishMode"], p["TargetPort"]) for p in lb["Ports"]] == [("host", 8080)], "the admin port is not"


def test_the_workers_keep_the_images_health_check_with_more_patience(
    stack: SwarmStack, engine: docker.DockerClient
) -> None:
    task = next(t for t in stack.tasks("worker") if t.running)
    container = engine.containers.get(task.container_id)
    check = container.attrs["Config"]["Healthcheck"]
    # the image's own check (/readyz, a worker stepping aside as slow counted well), merged in
    assert check["Test"] == ["CMD", "python3", "-m", "mrtr_worker.container_check"]
    assert (check["Timeout"], check["Retries"]) == (5 * SECOND, 5)
    assert container.attrs["State"]["Health"]["Status"] == "healthy"


def test_the_task_store_is_one_healthy_redis_pinned_to_its_node_and_never_doubled(
    stack: SwarmStack, engine: docker.DockerClient
) -> None:
    spec = stack.spec("redis")
    assert spec["Mode"]["Replicated"]["Replicas"] == 1
    assert spec["TaskTemplate"]["Placement"]["Constraints"] == ["node.role == manager"]
    assert spec["UpdateConfig"]["Order"] == "stop-first"
    (mount,) = spec["TaskTemplate"]["ContainerSpec"]["Mounts"]
    assert (mount["Type"], mount["Source"], mount["Target"]) == ("volume", f"{stack.name}_redis-data", "/data")
    (task,) = [t for t in stack.tasks("redis") if t.running]
    container = engine.containers.get(task.container_id)
    assert container.attrs["State"]["Health"]["Status"] == "healthy"
    code, output = container.exec_run(["redis-cli", "-p", "6379", "CONFIG", "GET", "appendonly"])
    assert isinstance(output, bytes)  # not streamed
    assert (code, output.decode().split()) == (0, ["appendonly", "yes"])
    worker = stack.spec("worker")["TaskTemplate"]["ContainerSpec"]["Env"]
    assert "MRTR_WORKER_REDIS_URL=redis://redis:6379/0" in worker


def test_the_proxy_found_every_worker_through_tasks_dns_and_spreads_calls(
    stack: SwarmStack, lb_url: str, token: str
) -> None:
    listing = stack.lb_backends()
    assert len(listing) == 3
    assert {b["source"] for b in listing} == {"dns"}
    seen = set()
    with Client(f"{lb_url}/mcp", ScriptedInputs(forms=dict(LOGINS)), token=token) as client:
        done = client.call_tool("link_accounts")
        assert done.structured == {"linked": {"github_login": "octocat", "google_login": "octo"}}
        for n in range(9):
            seen.add(client.call_tool("echo", {"text": str(n)}).trace.hops[-1].instance)
    assert len(seen) == 3


def test_the_published_port_serves_no_admin_path(lb_url: str) -> None:
    """The proxy's admin API is on its unpublished admin port (asked above inside its container), not here."""
    for path in ("/lb/backends", "/lb/healthz", "/lb/metrics"):
        response = httpx.get(f"{lb_url}{path}", timeout=10)
        assert response.status_code == 404, path
    drain = httpx.post(f"{lb_url}/lb/backends/drain", params={"url": "http://worker:8000"}, timeout=10)
    assert drain.status_code == 404


def test_without_a_token_the_stack_refuses(lb_url: str) -> None:
    with Client(f"{lb_url}/mcp") as client, pytest.raises(AuthenticationFailed) as caught:
        client.call_tool("echo", {"text": "let me in"})
    assert caught.value.http_status == 401


def test_scaling_the_service_is_followed_by_the_proxy_without_a_restart(
    stack: SwarmStack, lb_url: str, engine: docker.DockerClient
) -> None:
    proxy = next(t for t in stack.tasks("lb") if t.running)
    since = int(time.time())
    stack.scale("worker", 4)
    try:
        wait_until(
            lambda: in_rotation(stack) == 4,
            timeout=120,
            interval=POLL_SECONDS,
            what="four workers in the proxy's rotation",
        )
        # The swarm's task list can lag the proxy's view (or show slot 4's task being replaced on a busy host).
        fourth = wait_until(
            lambda: next((t for t in stack.tasks("worker") if t.running and t.slot == 4), None),
            timeout=60,
            interval=POLL_SECONDS,
            what="the swarm to report slot 4's task running",
        )
    finally:
        stack.scale("worker", 3)  # the next test's rolling update counts three slots, whatever happened here
    wait_until(
        lambda: in_rotation(stack) == 3 and len(stack.lb_backends()) == 3,
        timeout=120,
        interval=POLL_SECONDS,
        what="three workers again",
    )
    stack.wait_converged("worker")
    assert next(t for t in stack.tasks("lb") if t.running).id == proxy.id, "the proxy must not have been replaced"
    # The swarm forgets a task scaled away; the engine's events still tell how its container ended.
    exits: list[str] = []

    def died() -> bool:
        filters = {"container": fourth.container_id, "event": "die"}
        events = engine.events(since=since, until=int(time.time()) + 1, filters=filters, decode=True)
        exits[:] = [event["Actor"]["Attributes"]["exitCode"] for event in events]
        return bool(exits)

    wait_until(died, timeout=60, interval=POLL_SECONDS, what="the task scaled away to exit")
    assert exits == ["0"], "the task scaled away drained and exited by itself"


def test_a_rolling_update_under_distributed_locust_loses_nothing(
    stack: SwarmStack, image_ids: dict[str, str], out_dir: Path
) -> None:
    rollback = os.environ.get("MRTR_SWARM_ROLLBACK") == "1"
    v1, v2 = image_ids["MRTR_WORKER_IMAGE"], image_ids["MRTR_WORKER_V2_IMAGE"]
    code, summary = run(stack, out_dir, v2, Options(rollback=rollback))
    assert json.loads((out_dir / "summary.json").read_text()) == summary
    assert summary["requests"] > 0
    assert summary["failures"] == 0
    assert summary["wrong_answers"] == 0
    assert summary["reasked_questions"] == 0
    assert summary["requests_both_versions"] > 0
    assert summary["completed_by_version"].get("2", 0) > 0
    passes = summary["swarm"]["passes"]
    assert passes["update v1->v2"]["state"] == "completed"
    assert passes["update v1->v2"]["old_exit_codes"] == [0, 0, 0]
    if rollback:
        assert passes["rollback v2->v1"]["state"] == "rollback_completed"
        assert passes["rollback v2->v1"]["old_exit_codes"] == [0, 0, 0]
    assert summary["swarm"]["final_image"] == (v1 if rollback else v2)
    assert code == 0, summary
