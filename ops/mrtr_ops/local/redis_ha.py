"""Redis with Sentinel on 127.0.0.1: a primary, its replicas and three sentinels, and the faults on them.

The local cluster's task store with `scripts/cluster --redis-ha`
(`ClusterConfig.redis_ha`): Debian's `redis-server` for every node and
`redis-sentinel` for the sentinels (`scripts/redis-setup` installs both).
The workers are given the sentinels' addresses, not a server's: they ask the
sentinels for the primary (redis-py's Sentinel client) and follow a failover.

Every node runs with `min-replicas-to-write` (default 1) and
`min-replicas-max-lag`: a primary that has lost all its replicas refuses
writes instead of acknowledging what the next failover would drop. With the
default two replicas, the primary chosen after one failover still has one
and keeps taking writes; restart the dead node (it comes back as a replica)
before the next failover.

The fault API, for the chaos run and the failover benchmark:

* `primary()`: the node a majority of the sentinels name primary (what the
  workers connect to);
* `kill_primary()`: SIGKILL that node (its data directory stays); returns it;
* `wait_for_failover(old)`: until the sentinels agree on another node that
  acts as primary and accepts writes (it has its replicas back); returns it;
* `restart(node)`: start a dead node again as a replica of the current
  primary, and wait until it has synchronised;
* `failover()`: the three above in a row, returning (killed, new primary);
* `pause_primary()` and `resume(node)`: SIGSTOP the primary (alive, silent,
  its clients' connections open: a partition, as far as Sentinel can tell),
  and wake it once the sentinels have failed over; they demote it;
* `kill_primary_behind_replicas(lag)`: the replication stream held up for
  `lag` seconds, then the primary killed: asynchronous replication's loss
  window, made as wide as `lag`.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis

from mrtr_ops.local.process import LOOPBACK
from mrtr_ops.local.redis import RedisServer
from mrtr_ops.local.sentinel import SERVICE, SentinelServer, SentinelTiming
from mrtr_ops.waiting import wait_until

SENTINELS_VARIABLE = "MRTR_WORKER_REDIS_SENTINELS"
SERVICE_VARIABLE = "MRTR_WORKER_REDIS_SENTINEL_SERVICE"
WAIT_REPLICAS_VARIABLE = "MRTR_WORKER_REDIS_WAIT_REPLICAS"
WAIT_TIMEOUT_VARIABLE = "MRTR_WORKER_REDIS_WAIT_TIMEOUT_MS"
_STATE_FILE = "ha.json"
"""Which node was primary when the set last stopped: it starts as primary next time (it has the newest data)."""


class NoPrimary(RuntimeError):
    """The sentinels do not agree on a primary (a failover is under way, or too few of them answer)."""


class RedisHA:
    """A primary, `replicas` replicas and `sentinels` sentinels, in `directory` (one subdirectory each)."""

    def __init__(
        self,
        directory: Path,
        *,
        replicas: int = 2,
        sentinels: int = 3,
        timing: SentinelTiming | None = None,
        min_replicas_to_write: int = 1,
        min_replicas_max_lag: int = 10,
    ) -> None:
        if replicas < 1 or sentinels < 1:
            raise ValueError("Sentinel needs at least one replica and one sentinel")
        if min_replicas_to_write > replicas:
            raise ValueError(f"min-replicas-to-write {min_replicas_to_write} > {replicas} replicas: no write passes")
        self.directory = directory
        self.timing = timing or SentinelTiming()
        self.quorum = sentinels // 2 + 1
        self.min_replicas_to_write = min_replicas_to_write
        self.min_replicas_max_lag = min_replicas_max_lag
        self.nodes = [RedisServer(directory / f"node{i}") for i in range(replicas + 1)]
        self.sentinels = [SentinelServer(directory / f"sentinel{i}") for i in range(sentinels)]

    # --- the whole set -----------------------------------------------------------------------------

    @property
    def sentinel_addresses(self) -> str:
        """`host:port,...`: what the workers get as `MRTR_WORKER_REDIS_SENTINELS`."""
        return ",".join(s.address for s in self.sentinels)

    def worker_env(self, *, wait_replicas: int = 1, wait_timeout_ms: int | None = None) -> dict[str, str]:
        """The worker settings that point at this set through its sentinels (and make writes wait, if asked)."""
        env = {
            SENTINELS_VARIABLE: self.sentinel_addresses,
            SERVICE_VARIABLE: SERVICE,
            WAIT_REPLICAS_VARIABLE: str(wait_replicas),
        }
        if wait_timeout_ms is not None:
            env[WAIT_TIMEOUT_VARIABLE] = str(wait_timeout_ms)
        return env

    def start(self, timeout: float = 60.0) -> RedisHA:
        """Start the primary (the one of the last run, if any), its replicas, then the sentinels; wait until
        every sentinel knows every replica and every other sentinel (only then can they fail over)."""
        first = self._last_primary()
        try:
            primary = self.nodes[first]
            self._start_node(primary, None, timeout)
            for node in self.nodes:
                if node is not primary:
                    self._start_node(node, primary, timeout)
            for sentinel in self.sentinels:
                sentinel.start(primary.port, self.quorum, self.timing, timeout)
            wait_until(self._settled, timeout=timeout, interval=0.1, what="the sentinels to know the whole set")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Sentinels first (no failover while the set stops), then the replicas, the primary last."""
        try:
            primary: RedisServer | None = self.primary()
        except NoPrimary:
            primary = None
        for sentinel in self.sentinels:
            sentinel.stop()
        if primary is not None:
            (self.directory / _STATE_FILE).write_text(json.dumps({"primary": self.nodes.index(primary)}))
        for node in sorted(self.nodes, key=lambda n: n is primary):
            node.stop()

    def __enter__(self) -> RedisHA:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what the sentinels say --------------------------------------------------------------------

    def primary(self) -> RedisServer:
        """The node a majority of the sentinels name primary; `NoPrimary` while they disagree."""
        named: Counter[int] = Counter()
        for sentinel in self.sentinels:
            answer = sentinel.ask("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
            if isinstance(answer, list) and len(answer) == 2:
                named[int(answer[1])] += 1
        if named:
            port, votes = named.most_common(1)[0]
            if votes >= self.quorum:
                return self._node_on(port)
        raise NoPrimary(f"the sentinels do not agree on a primary: {dict(named)}")

    def replicas(self) -> list[RedisServer]:
        """The running nodes other than the primary."""
        primary = self.primary()
        return [node for node in self.nodes if node is not primary and node.running]

    def accepts_writes(self, node: RedisServer) -> bool:
        """The node is a primary with enough replicas connected for `min-replicas-to-write`."""
        info = _info(node)
        return info.get("role") == "master" and int(info.get("connected_slaves", 0)) >= self.min_replicas_to_write

    # --- faults ------------------------------------------------------------------------------------

    def kill_primary(self) -> RedisServer:
        """SIGKILL the current primary, as a crash would; its data directory stays. Returns the killed node."""
        node = self.primary()
        node.kill()
        return node

    def wait_for_failover(self, old: RedisServer, timeout: float = 60.0) -> RedisServer:
        """Wait until a majority of sentinels name a node other than `old` and it accepts writes; return it."""

        def promoted() -> RedisServer | None:
            try:
                node = self.primary()
            except NoPrimary:
                return None
            return node if node is not old and node.running and self.accepts_writes(node) else None

        return wait_until(promoted, timeout=timeout, interval=0.05, what=f"a primary other than port {old.port}")

    def restart(self, node: RedisServer, timeout: float = 60.0) -> RedisServer:
        """Start a dead node again as a replica of the current primary, and wait until it has synchronised.

        If the sentinels still name it primary (it died moments ago), first wait until they promote another:
        started as primary, it would serve its append-only file (up to a second older) and its replicas would
        resynchronise from it, dropping writes they had acknowledged. Only with no other node running does it
        start as primary (the same rule as the images' `services/redis/node-start`)."""
        if node.running:
            raise RuntimeError(f"Redis on port {node.port} is still running (pid {node.pid})")
        primary = wait_until(self._agreed_primary, timeout=timeout, interval=0.05, what="the sentinels to agree")
        if primary is node and any(other.running for other in self.nodes):
            primary = self.wait_for_failover(node, timeout)
        self._start_node(node, None if primary is node else primary, timeout)
        return node

    def pause_primary(self) -> RedisServer:
        """SIGSTOP the current primary: alive but silent, as behind a network partition; its clients' connections
        stay open. Returns the paused node (`resume` wakes it)."""
        node = self.primary()
        _signal(node, signal.SIGSTOP)
        return node

    def resume(self, node: RedisServer, timeout: float = 60.0) -> RedisServer:
        """SIGCONT a paused node and wait until it has settled: a replica of the primary the sentinels name
        (they demote a woken old primary themselves), or that primary itself if no failover happened."""
        _signal(node, signal.SIGCONT)

        def settled() -> bool:
            primary = self._agreed_primary()
            if primary is None:
                return False
            if primary is node:
                return _info(node).get("role") == "master"
            info = _info(node)
            return info.get("master_port") == primary.port and info.get("master_link_status") == "up"

        wait_until(settled, timeout=timeout, interval=0.05, what=f"Redis on port {node.port} to settle after a pause")
        return node

    def kill_primary_behind_replicas(self, lag_seconds: float = 1.0, flood_mb: int = 32) -> RedisServer:
        """The replication stream held up, then the primary killed: what a slow or broken network does.

        Stopping the replicas (SIGSTOP) is not enough on one machine: the kernel keeps taking the stream
        into their sockets' buffers and hands it over when they wake. So while they are stopped, `flood_mb`
        MiB of filler (keys that expire after a minute) fills those buffers first; what the primary
        acknowledges after that waits in its own memory and dies with it. Returns the killed node."""
        node = self.primary()
        replicas = [other for other in self.nodes if other is not node and other.running]
        for replica in replicas:
            _signal(replica, signal.SIGSTOP)
        try:
            started = time.monotonic()
            client = redis.Redis(host=LOOPBACK, port=node.port, socket_timeout=10)
            try:
                filler = b"x" * (1 << 20)
                for index in range(flood_mb):
                    client.set(f"{SERVICE}-ha-filler:{index}", filler, px=60_000)
            finally:
                client.close()
            time.sleep(max(0.0, lag_seconds - (time.monotonic() - started)))  # the fault lasts this long
            node.kill()
        finally:
            for replica in replicas:
                _signal(replica, signal.SIGCONT)
        return node

    def failover(self, timeout: float = 60.0) -> tuple[RedisServer, RedisServer]:
        """Kill the primary, wait for the new one, restart the old one as its replica: (killed, new primary)."""
        old = self.kill_primary()
        new = self.wait_for_failover(old, timeout)
        self.restart(old, timeout)
        return old, new

    # --- internals ---------------------------------------------------------------------------------

    def _start_node(self, node: RedisServer, primary: RedisServer | None, timeout: float) -> None:
        node.options = [
            "--min-replicas-to-write", str(self.min_replicas_to_write),
            "--min-replicas-max-lag", str(self.min_replicas_max_lag),
            "--repl-diskless-sync-delay", "0",  # a (re)joining replica syncs at once, not after 5 s
        ]  # fmt: skip
        if primary is not None:
            node.options += ["--replicaof", LOOPBACK, str(primary.port)]
        node.start(timeout)
        if primary is not None:
            wait_until(
                lambda: _info(node).get("master_link_status") == "up",
                timeout=timeout,
                interval=0.05,
                what=f"Redis on port {node.port} to synchronise with port {primary.port}",
            )

    def _agreed_primary(self) -> RedisServer | None:
        try:
            return self.primary()
        except NoPrimary:
            return None

    def _settled(self) -> bool:
        replicas, others = len(self.nodes) - 1, len(self.sentinels) - 1
        for sentinel in self.sentinels:
            state = _pairs(sentinel.ask("SENTINEL", "MASTER", SERVICE))
            if int(state.get("num-slaves", -1)) < replicas or int(state.get("num-other-sentinels", -1)) < others:
                return False
        return True

    def _node_on(self, port: int) -> RedisServer:
        for node in self.nodes:
            if node.port == port:
                return node
        raise NoPrimary(f"the sentinels name port {port}, which is none of this set's nodes")

    def _last_primary(self) -> int:
        try:
            index = int(json.loads((self.directory / _STATE_FILE).read_text())["primary"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0
        return index if 0 <= index < len(self.nodes) else 0


def _signal(node: RedisServer, signum: signal.Signals) -> None:
    if not node.running:
        raise RuntimeError(f"Redis on port {node.port} is not running")
    node.signal(signum)


def _info(node: RedisServer) -> dict[str, Any]:
    """`INFO replication` of a node ({} when it does not answer)."""
    client = redis.Redis(host=LOOPBACK, port=node.port, socket_timeout=1.0, decode_responses=True)
    try:
        return dict(client.info("replication"))
    except (redis.RedisError, OSError):
        return {}
    finally:
        client.close()


def _pairs(reply: Any) -> dict[str, Any]:
    """A sentinel's flat [key, value, ...] reply (or redis-py's dict of it) as a dict."""
    if isinstance(reply, dict):
        return reply
    if isinstance(reply, list):
        return dict(zip(reply[0::2], reply[1::2], strict=False))
    return {}
