"""The task store with Sentinel in compose, end to end (run by `scripts/compose-redis-ha-e2e`).

The project runs compose.yaml + compose.override.yaml + compose.redis-ha.yaml: `redis` primary,
`redis-replica-1` and `-2` its replicas, three sentinels agreeing on it, the workers given the
sentinels. Then the primary's redis-server is killed from the host (SIGKILL: a crash, which the
restart policy answers, unlike `docker kill`): a task running meanwhile finishes exactly, the
sentinels promote a replica, and the old primary's container comes back as its replica.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

import docker
import pytest
from docker.models.containers import Container

from mrtr_client import Client, TaskExchange
from mrtr_ops.waiting import wait_until
from mrtr_worker.compute.primes import KNOWN_COUNTS
from tests.support.paths import ROOT

NODES = ("redis", "redis-replica-1", "redis-replica-2")
SENTINELS = ("sentinel-1", "sentinel-2", "sentinel-3")

Find = Callable[[str], Container]


@pytest.fixture(scope="module")
def engine() -> docker.DockerClient:
    return docker.from_env()


@pytest.fixture(scope="module")
def find(engine: docker.DockerClient) -> Find:
    project = os.environ["COMPOSE_PROJECT_NAME"]

    def one(service: str) -> Container:
        labels = [f"com.docker.compose.project={project}", f"com.docker.compose.service={service}"]
        found: list[Container] = engine.containers.list(all=True, filters={"label": labels})
        assert found, f"no container of {service}"
        return sorted(found, key=lambda c: str(c.name))[0]

    return one


@pytest.fixture(scope="module")
def mcp_url() -> str:
    return f"http://127.0.0.1:{os.environ.get('MRTR_PORT', '18180')}/mcp"


@pytest.fixture(scope="module")
def token() -> str:
    from mrtr_dev_issuer import DevIssuer

    return DevIssuer.load(ROOT / "secrets" / "issuer-private.pem").mint("compose-ha-e2e")


def cli(container: Container, *command: str) -> str:
    code, output = container.exec_run(["redis-cli", *command])
    assert isinstance(output, bytes)
    return output.decode().strip() if code == 0 else ""


def named_primary(find: Find) -> str | None:
    """The node (service name) a majority of the sentinels name primary."""
    ask = ("-p", "26379", "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mrtr")
    named = [cli(find(sentinel), *ask).split("\n")[0] for sentinel in SENTINELS]
    best = max(set(named), key=named.count)
    return best if best in NODES and named.count(best) >= 2 else None


def role(find: Find, node: str) -> tuple[str, str]:
    """(role, the primary it follows or "") of a node, from INFO replication."""
    info = dict(
        line.split(":", 1) for line in cli(find(node), "-p", "6379", "INFO", "replication").splitlines() if ":" in line
    )
    return info.get("role", ""), info.get("master_host", "")


def test_the_set_starts_as_the_overlay_says(find: Find) -> None:
    assert wait_until(lambda: named_primary(find), timeout=120, what="the sentinels to agree") == "redis"
    assert role(find, "redis")[0] == "master"
    for replica in NODES[1:]:
        assert role(find, replica) == ("slave", "redis")
    assert cli(find("redis"), "-p", "6379", "CONFIG", "GET", "min-replicas-to-write").splitlines()[1] == "1"
    environment = dict(entry.split("=", 1) for entry in find("worker").attrs["Config"]["Env"])
    assert environment["MRTR_WORKER_REDIS_SENTINELS"] == ",".join(f"{s}:26379" for s in SENTINELS)
    assert environment["MRTR_WORKER_REDIS_URL"] == ""
    for sentinel in SENTINELS:
        state = cli(find(sentinel), "-p", "26379", "SENTINEL", "MASTER", "mrtr").splitlines()
        fields = dict(zip(state[0::2], state[1::2], strict=False))
        assert fields["num-slaves"] == "2", sentinel
        assert fields["num-other-sentinels"] == "2", sentinel


def test_a_task_finishes_exactly_while_the_primary_crashes_and_it_rejoins_as_a_replica(
    find: Find, mcp_url: str, token: str
) -> None:
    old = named_primary(find)
    assert old is not None
    crashed: list[int] = []

    def crash_once(exchange: TaskExchange) -> None:
        if not crashed and exchange.detail == "created":
            pid = int(find(old).attrs["State"]["Pid"])
            crashed.append(pid)
            threading.Thread(target=os.kill, args=(pid, signal.SIGKILL), daemon=True).start()

    limit = 50_000_000
    with Client(mcp_url, token=token) as client:
        done = client.call_tool("count_primes", {"limit": limit, "segment": 2_500_000}, task=True, on_task=crash_once)
    assert crashed
    assert done.structured == {"count": KNOWN_COUNTS[limit]}
    new = wait_until(lambda: (n := named_primary(find)) not in (None, old) and n, timeout=120, what="a new primary")
    wait_until(lambda: role(find, old) == ("slave", new), timeout=180, what=f"{old} back as a replica of {new}")
    logs = find(old).logs().decode()
    assert "node-start:" in logs
    with Client(mcp_url, token=token) as client:  # and new tasks run on the new primary
        small = client.call_tool("count_primes", {"limit": 1_000_000}, task=True)
    assert small.structured == {"count": KNOWN_COUNTS[1_000_000]}
