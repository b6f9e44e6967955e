"""The compose cluster's task store, end to end (run by `scripts/compose-e2e`, after test_compose.py).

The `redis` service runs the image services/redis builds (user 10001, append-only file on, its
data in the named volume), every worker container has its URL, and a task through the proxy
finishes exactly across `docker compose restart redis`.
"""

from __future__ import annotations

from docker.models.containers import Container

from mrtr_client import Client, TaskExchange
from mrtr_worker.compute.primes import KNOWN_COUNTS
from tests.e2e.compose.conftest import ServiceContainers, compose


def redis_cli(container: Container, *command: str) -> str:
    code, output = container.exec_run(["redis-cli", "-p", "6379", *command])  # not streamed: one bytes value
    assert code == 0, output
    assert isinstance(output, bytes)
    return output.decode().strip()


def the_redis(containers: ServiceContainers) -> Container:
    (container,) = containers("redis")
    return container


def test_redis_runs_as_the_images_user_with_its_append_only_file_in_the_volume(
    containers: ServiceContainers, project: str
) -> None:
    redis = the_redis(containers)
    assert redis.attrs["Config"]["User"] == "10001"
    assert redis.attrs["State"]["Health"]["Status"] == "healthy"
    assert redis_cli(redis, "PING") == "PONG"
    assert redis_cli(redis, "CONFIG", "GET", "appendonly").splitlines() == ["appendonly", "yes"]
    (data,) = [m for m in redis.attrs["Mounts"] if m["Destination"] == "/data"]
    assert (data["Type"], data["Name"]) == ("volume", f"{project}_redis-data")
    assert not redis.attrs["NetworkSettings"]["Ports"].get("6379/tcp"), "not published on the host"


def test_every_worker_container_has_the_url_of_the_redis_service(containers: ServiceContainers) -> None:
    workers = containers("worker") + containers("worker-v2")
    assert workers
    for worker in workers:
        assert "MRTR_WORKER_REDIS_URL=redis://redis:6379/0" in worker.attrs["Config"]["Env"], worker.name


def test_a_restart_keeps_the_data(containers: ServiceContainers) -> None:
    redis_cli(the_redis(containers), "SET", "e2e:restart", "kept")
    compose("restart", "redis")
    compose("up", "-d", "--wait", "redis")
    assert redis_cli(the_redis(containers), "GET", "e2e:restart") == "kept"


def test_a_task_finishes_exactly_across_a_redis_restart(lb_url: str, token: str, containers: ServiceContainers) -> None:
    restarted: list[str] = []

    def restart_once(exchange: TaskExchange) -> None:
        if not restarted:
            restarted.append(exchange.task_id)
            compose("restart", "redis")
            compose("up", "-d", "--wait", "redis")  # healthy: its append-only file read back

    limit = 5_000_000
    with Client(f"{lb_url}/mcp", token=token) as client:
        done = client.call_tool("count_primes", {"limit": limit}, task=True, on_task=restart_once)
    assert restarted
    assert done.structured == {"count": KNOWN_COUNTS[limit]}
    assert the_redis(containers).attrs["State"]["Health"]["Status"] in {"healthy", "starting"}
