"""The images' start scripts of the Sentinel set (`services/redis/node-start`, `sentinel-start`), run here.

Compose and Kubernetes run them in containers; here they run as processes on 127.0.0.1 (the same
Debian `redis-server`, `redis-sentinel` and `redis-cli` the image installs, each node and sentinel
on a port of its own), so what they decide is checked without Docker: a cold start makes the initial
primary primary; a killed primary restarted by its script comes back as a replica of the node the
sentinels promoted, not as a primary; a sentinel started afresh watches the current primary.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from mrtr_ops.local.process import LOOPBACK, ChildProcess, free_port
from mrtr_ops.waiting import wait_until
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow  # Redis nodes and sentinels: real processes

SCRIPTS = ROOT / "services" / "redis"
CONF = SCRIPTS / "redis.conf"


def _client(port: int) -> redis.Redis:
    return redis.Redis(host=LOOPBACK, port=port, decode_responses=True, socket_timeout=5)


def _replication(port: int) -> dict[str, object]:
    try:
        with _client(port) as client:
            return dict(client.info("replication"))
    except (redis.RedisError, OSError):
        return {}


@dataclass
class Script(ChildProcess):
    """One start script as a process (the script execs the server, so its pid is the server's)."""

    argv: list[str]
    env: dict[str, str]
    log: Path

    def start(self) -> Script:
        self._spawn(self.argv, self.log, {**os.environ, **self.env})
        return self


@dataclass
class ScriptedSet:
    """Three nodes and three sentinels started by the scripts, on loopback ports, in `directory`."""

    directory: Path
    node_ports: list[int] = field(default_factory=lambda: [free_port() for _ in range(3)])
    sentinel_ports: list[int] = field(default_factory=lambda: [free_port() for _ in range(3)])
    nodes: dict[int, Script] = field(default_factory=dict)
    sentinels: dict[int, Script] = field(default_factory=dict)

    @property
    def common(self) -> dict[str, str]:
        return {
            "MRTR_REDIS_NODES": ",".join(f"{LOOPBACK}:{p}" for p in self.node_ports),
            "MRTR_REDIS_INITIAL_PRIMARY": f"{LOOPBACK}:{self.node_ports[0]}",
            "MRTR_SENTINELS": ",".join(f"{LOOPBACK}:{p}" for p in self.sentinel_ports),
            "MRTR_SENTINEL_DOWN_AFTER_MS": "2000",
            "MRTR_SENTINEL_FAILOVER_TIMEOUT_MS": "5000",
        }

    def start_node(self, port: int) -> Script:
        data = self.directory / f"node-{port}"
        data.mkdir(exist_ok=True)
        conf = data / "redis.conf"  # the image's, with its data here and on loopback only
        conf.write_text(
            CONF.read_text().replace("dir /data", f"dir {data}").replace("bind 0.0.0.0 -::*", "bind 127.0.0.1")
        )
        env = {
            **self.common,
            "MRTR_REDIS_ANNOUNCE": LOOPBACK,
            "MRTR_REDIS_PORT": str(port),
            "MRTR_REDIS_CONF": str(conf),
        }
        argv = [str(SCRIPTS / "node-start"), "--repl-diskless-sync-delay", "0"]
        self.nodes[port] = Script(argv, env, self.directory / f"node-{port}.log").start()
        return self.nodes[port]

    def start_sentinel(self, port: int) -> Script:
        peers = ",".join(f"{LOOPBACK}:{p}" for p in self.sentinel_ports if p != port)
        env = {
            **self.common,
            "MRTR_SENTINEL_ANNOUNCE": LOOPBACK,
            "MRTR_SENTINEL_PORT": str(port),
            "MRTR_SENTINEL_PEERS": peers,
            "MRTR_SENTINEL_DIR": str(self.directory / f"sentinel-{port}"),
        }
        argv = [str(SCRIPTS / "sentinel-start"), "--bind", LOOPBACK]
        self.sentinels[port] = Script(argv, env, self.directory / f"sentinel-{port}.log").start()
        return self.sentinels[port]

    def named_primary(self) -> int | None:
        """The port a majority of the sentinels name primary."""
        named: list[int] = []
        for port in self.sentinel_ports:
            try:
                with _client(port) as client:
                    answer = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mrtr")
            except (redis.RedisError, OSError):
                continue
            if answer:
                named.append(int(answer[1]))
        best = max(set(named), key=named.count, default=None)
        return best if best is not None and named.count(best) >= 2 else None

    def settled(self) -> bool:
        """One primary with both replicas linked, named by the sentinels, each knowing the whole set."""
        primary = self.named_primary()
        if primary is None or _replication(primary).get("connected_slaves") != 2:
            return False
        for port in self.sentinel_ports:
            try:
                with _client(port) as client:
                    state = client.sentinel_master("mrtr")
            except (redis.RedisError, OSError):
                return False
            if state.get("num-slaves") != 2 or state.get("num-other-sentinels") != 2:
                return False
        return True

    def stop(self) -> None:
        for script in [*self.sentinels.values(), *self.nodes.values()]:
            script.stop()


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScriptedSet]:
    if shutil.which("redis-sentinel") is None or shutil.which("redis-cli") is None:
        pytest.fail("redis-sentinel and redis-cli are needed: scripts/redis-setup installs them")
    the_set = ScriptedSet(Path(tmp_path_factory.mktemp("scripted")))
    yield the_set
    the_set.stop()


def test_a_cold_start_makes_the_initial_primary_primary(scripted: ScriptedSet) -> None:
    for port in scripted.sentinel_ports:
        scripted.start_sentinel(port)
    for port in scripted.node_ports:
        scripted.start_node(port)
    wait_until(scripted.settled, timeout=120, interval=0.2, what="the scripted set to settle")
    assert scripted.named_primary() == scripted.node_ports[0]
    for port in scripted.node_ports[1:]:
        info = _replication(port)
        assert (info["role"], info["master_port"]) == ("slave", scripted.node_ports[0])
    with _client(scripted.node_ports[0]) as client:
        assert client.config_get("min-replicas-to-write") == {"min-replicas-to-write": "1"}


def test_a_killed_primary_restarted_at_once_comes_back_as_a_replica(scripted: ScriptedSet) -> None:
    """Restarted before the sentinels noticed (as a container restart policy does): it waits for them."""
    old = scripted.named_primary()
    assert old is not None
    with _client(old) as client:
        client.set("test:acknowledged", "yes")
        assert client.wait(2, 5_000) == 2
    scripted.nodes[old].kill()
    restarted = scripted.start_node(old)  # at once: the sentinels still name it primary
    new = wait_until(
        lambda: (p := scripted.named_primary()) not in (None, old) and p,
        timeout=120,
        interval=0.1,
        what="a new primary",
    )
    wait_until(scripted.settled, timeout=120, interval=0.2, what="the set to settle again")
    info = _replication(old)
    assert (info["role"], info["master_port"]) == ("slave", new)
    assert restarted.popen is not None
    assert restarted.popen.poll() is None
    for port in scripted.node_ports:
        with _client(port) as client:
            assert client.get("test:acknowledged") == "yes", port
    log = (scripted.directory / f"node-{old}.log").read_text()
    assert "the sentinels still name this node primary: waiting" in log


def test_a_sentinel_started_afresh_watches_the_current_primary(scripted: ScriptedSet) -> None:
    current = scripted.named_primary()
    assert current is not None
    assert current != scripted.node_ports[0]
    port = scripted.sentinel_ports[2]
    scripted.sentinels[port].stop()
    shutil.rmtree(scripted.directory / f"sentinel-{port}")  # a new sentinel: nothing learned
    scripted.start_sentinel(port)
    wait_until(scripted.settled, timeout=120, interval=0.2, what="the new sentinel to know the set")
    with _client(port) as client:
        assert int(client.sentinel_master("mrtr")["port"]) == current
