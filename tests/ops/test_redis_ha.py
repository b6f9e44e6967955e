"""Redis with Sentinel in the local cluster (`scripts/cluster --redis-ha`): failovers on real processes.

The set (a primary, two replicas, three sentinels) and its fault API, then a cluster on it: a task
running while the primary is killed completes exactly, every worker reaches the new primary by itself
(through the sentinels), and the killed node comes back as a replica.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
import redis.asyncio as aioredis

from mrtr_client import Client, TaskExchange
from mrtr_ops.local.cluster import LocalCluster
from mrtr_ops.local.redis_ha import SENTINELS_VARIABLE, RedisHA
from mrtr_ops.local.sentinel import SentinelTiming
from mrtr_ops.waiting import wait_until
from mrtr_worker import redis_link
from mrtr_worker.compute.primes import KNOWN_COUNTS
from mrtr_worker.redis_link import RedisTarget, parse_sentinels
from tests.ops.conftest import MakeCluster
from tests.ops.test_cluster_redis import RunCli, environ, run_cli

pytestmark = pytest.mark.slow  # Redis nodes, sentinels and clusters: real processes

__all__ = ["run_cli"]  # the fixture, used below

TIMING = SentinelTiming(down_after_ms=2_000, failover_timeout_ms=5_000)
"""The local default: a primary silent for 2 s is down (1 s risks a false alarm on a starved CI machine)."""


def _client(port: int) -> redis.Redis:
    return redis.Redis(port=port, decode_responses=True, socket_timeout=5)


def _replication(port: int) -> dict[str, object]:
    with _client(port) as client:
        return dict(client.info("replication"))


@pytest.fixture(scope="module")
def ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisHA]:
    redis_ha = RedisHA(Path(tmp_path_factory.mktemp("ha")), timing=TIMING).start()
    yield redis_ha
    redis_ha.stop()


def test_the_set_has_one_primary_two_replicas_and_sentinels_that_agree(ha: RedisHA) -> None:
    primary = ha.primary()
    replicas = ha.replicas()
    assert len(replicas) == 2
    assert primary not in replicas
    assert _replication(primary.port)["role"] == "master"
    assert _replication(primary.port)["connected_slaves"] == 2
    for node in replicas:
        info = _replication(node.port)
        assert (info["role"], info["master_port"], info["master_link_status"]) == ("slave", primary.port, "up")
    with _client(primary.port) as client:
        assert client.config_get("min-replicas-to-write") == {"min-replicas-to-write": "1"}
    assert ha.accepts_writes(primary)
    assert ha.sentinel_addresses.count(",") == 2


def test_a_failover_keeps_acknowledged_writes_and_the_dead_node_returns_as_a_replica(ha: RedisHA) -> None:
    for round_ in range(2):  # twice: the second failover starts from a node the first one restarted
        old = ha.primary()
        with _client(old.port) as client:
            client.set(f"test:kept:{round_}", "yes")
            assert client.wait(1, 5_000) >= 1  # acknowledged by a replica
        assert ha.kill_primary() is old
        assert not old.running
        new = ha.wait_for_failover(old, timeout=60)
        assert new is not old
        assert _replication(new.port)["role"] == "master"
        with _client(new.port) as client:
            assert client.get(f"test:kept:{round_}") == "yes"
        ha.restart(old)
        info = _replication(old.port)
        assert (info["role"], info["master_port"], info["master_link_status"]) == ("slave", new.port, "up")
        with _client(old.port) as client:
            assert client.get(f"test:kept:{round_}") == "yes"
        assert ha.primary() is new


def test_a_write_acknowledged_without_wait_is_lost_and_one_wait_confirmed_is_not(ha: RedisHA) -> None:
    """Redis's own words, shown: replication is asynchronous, so a write the primary acknowledged while its
    replicas lagged is gone after the failover; WAIT confirms nothing in that time, so it promised nothing."""
    old = ha.primary()
    plain: list[str] = []
    confirmed: list[str] = []
    stop = threading.Event()

    def write() -> None:
        with _client(old.port) as client:
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    client.set(f"test:plain:{n}", "1")
                    plain.append(f"test:plain:{n}")
                    client.set(f"test:waited:{n}", "1")
                    if client.wait(1, 100) >= 1:
                        confirmed.append(f"test:waited:{n}")
                except (redis.RedisError, OSError):
                    return  # the primary died

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    wait_until(lambda: len(confirmed) >= 5, timeout=30, what="writes confirmed by a replica before the fault")
    before = len(plain)
    ha.kill_primary_behind_replicas(lag_seconds=1.0)
    stop.set()
    writer.join(30)
    assert len(plain) > before, "the primary acknowledged writes while its replicas lagged"
    new = ha.wait_for_failover(old, timeout=60)
    ha.restart(old)
    with _client(new.port) as client:
        kept_plain = [key for key in plain if client.exists(key)]
        assert all(client.exists(key) for key in confirmed), "a write a replica confirmed (WAIT) was lost"
    assert len(kept_plain) < len(plain), "some writes acknowledged without WAIT are lost"


def test_a_client_leaves_an_old_primary_that_comes_back(ha: RedisHA) -> None:
    """The primary paused (a partition), the sentinels fail over, it wakes: until the sentinels demote it (they
    look at it every ten seconds), it still acts as a primary. The worker's client must not go on using its
    open connection to it: redis-py alone does, until a write fails on it or Sentinel kills its clients."""
    target = RedisTarget(sentinels=parse_sentinels(ha.sentinel_addresses.split(",")))

    async def role(client: aioredis.Redis) -> tuple[str, int]:
        reply = await client.execute_command("ROLE")  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        info = await client.info("server")
        return str(reply[0]), int(info["tcp_port"])

    async def scenario() -> None:
        client = redis_link.connect(target, retries=5)
        try:
            old = ha.primary()
            assert await role(client) == ("master", old.port)  # its connection is now open, and pooled
            ha.pause_primary()
            try:
                new = await asyncio.to_thread(ha.wait_for_failover, old, 60.0)
            finally:
                assert old.popen is not None
                old.popen.send_signal(signal.SIGCONT)  # awake, not yet demoted
            try:
                assert await role(client) == ("master", new.port)
            finally:
                await asyncio.to_thread(ha.resume, old, 60.0)
        finally:
            await client.aclose()

    asyncio.run(scenario())


def test_a_restart_refuses_a_running_node(ha: RedisHA) -> None:
    with pytest.raises(RuntimeError, match="still running"):
        ha.restart(ha.primary())


@pytest.fixture(scope="module")
def cluster(make_cluster: MakeCluster) -> LocalCluster:
    return make_cluster(workers=2, redis_ha=True, sentinel_timing=TIMING)


def test_every_worker_is_given_the_sentinels_not_a_server(cluster: LocalCluster) -> None:
    assert cluster.redis is None
    assert cluster.redis_ha is not None
    for handle in cluster.workers.values():
        env = environ(handle.process.pid)
        assert env[SENTINELS_VARIABLE] == cluster.redis_ha.sentinel_addresses
        assert env["MRTR_WORKER_REDIS_WAIT_REPLICAS"] == "1"
        assert "MRTR_WORKER_REDIS_URL" not in env


def _tasks_ok(cluster: LocalCluster) -> bool:
    """Every worker says on /readyz that its runner reaches the task store."""
    for handle in cluster.workers.values():
        body = httpx.get(f"{handle.url}/readyz", timeout=5).json()
        if body.get("tasks", {}).get("store") != "ok":
            return False
    return True


def test_a_task_completes_exactly_across_a_failover_and_every_worker_follows(cluster: LocalCluster) -> None:
    ha = cluster.redis_ha
    assert ha is not None
    wait_until(lambda: _tasks_ok(cluster), timeout=60, what="every worker's runner to reach Redis")
    outcome: list[tuple[object, object]] = []

    def fail_over_once(exchange: TaskExchange) -> None:
        if not outcome and exchange.detail == "created":
            outcome.append(("started", None))
            threading.Thread(target=lambda: outcome.append(ha.failover(timeout=60)), daemon=True).start()

    limit = 50_000_000
    with Client(cluster.mcp_url) as client:
        done = client.call_tool(
            "count_primes", {"limit": limit, "segment": 2_500_000}, task=True, on_task=fail_over_once
        )
    assert done.structured == {"count": KNOWN_COUNTS[limit]}
    wait_until(lambda: len(outcome) == 2, timeout=120, what="the failover to finish")
    old, new = outcome[1]
    assert old is not new
    # Each worker, asked directly (not through the proxy), creates and finishes a task on the new primary.
    for handle in cluster.workers.values():
        with Client(f"{handle.url}/mcp") as client:
            small = client.call_tool("count_primes", {"limit": 1_000_000}, task=True)
        assert small.structured == {"count": KNOWN_COUNTS[1_000_000]}
    wait_until(lambda: _tasks_ok(cluster), timeout=60, what="every worker's runner to reach the new primary")


def test_the_command_line_runs_redis_with_sentinel(run_cli: RunCli) -> None:
    run = run_cli("--redis-ha", "--redis-replicas", "1")
    (line,) = [line for line in run.text().splitlines() if line.startswith("redis: ")]
    assert "Sentinel service 'mrtr' via 127.0.0.1:" in line
    assert "writes wait for 1 replica(s)" in line
    primary = int(line.split("primary 127.0.0.1:")[1].split()[0])
    assert _replication(primary)["connected_slaves"] == 1
    assert run.stop() == 0
    assert not (run.work_dir / "redis").exists()
    assert (run.work_dir / "redis-ha" / "ha.json").exists()  # which node to start as primary next time
