"""How a worker reaches its Redis: one server by URL, or whichever server Sentinel names primary.

Every Redis user of the worker (the task store, the replay guard that shares
its client, the vault flows) gets its client here, so in Sentinel mode all
of them follow a failover the same way: redis-py's Sentinel client asks the
sentinels for the primary on every new connection, and a dropped connection
(the primary died) or a READONLY answer (it was demoted) is retried on a
fresh one, which finds the new primary once the sentinels have promoted it.
Every sentinel is asked at once and the newest configuration wins
(`newest_primary`), so one that has not heard of a failover yet cannot send
the client back to an old primary.

`ReplicatedPipeline` is the one place a write waits for replicas (Redis's
`WAIT`): Redis counts only the writes of the connection WAIT is sent on, and
a pooled pipeline gives its connection back as soon as EXEC answers, so the
WAIT is sent inside the pipeline's own transaction run, on that connection
(an override of redis-py's private `Pipeline._execute_transaction`, the one
private name the worker uses from redis-py: redis is pinned exactly and
`tests/worker/test_redis_link.py` checks the name).
Redis's own words bound what it buys: replication stays asynchronous and
WAIT "does not make Redis a strongly consistent store"; it makes a failover
that promotes a replica which had the write keep it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as redis
from redis.asyncio.client import Pipeline
from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel, SentinelConnectionPool
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

SOCKET_TIMEOUT = 2.0
"""Seconds a command may wait for its answer (a WAIT gets its own timeout on top)."""
CONNECT_TIMEOUT = 1.0
SENTINEL_TIMEOUT = 0.5
"""Seconds a question to a sentinel may take (all are asked at once; one that has not answered by then is left out)."""
RECHECK_SECONDS = 0.1
"""How often, at most, a Sentinel client asks again which node is primary (see `_FollowingPool`): the longest
a command may still go to an old primary the sentinels no longer name. One small question to each sentinel
(asked at once) per tenth of a second of traffic. The failover benchmark counts what clients still saw of an
old primary."""


@dataclass(frozen=True)
class RedisTarget:
    """Where the fleet's Redis is: a URL (one server), or sentinels and the name of the service they watch."""

    url: str | None = None
    sentinels: tuple[tuple[str, int], ...] = ()
    service: str = "mrtr"

    def __post_init__(self) -> None:
        if (self.url is None) == (not self.sentinels):
            raise ValueError("a Redis target is a URL or a list of sentinels, exactly one of them")

    @property
    def sentinel_mode(self) -> bool:
        return bool(self.sentinels)

    def describe(self) -> str:
        """For logs: never the URL itself (it may carry a password)."""
        if self.sentinel_mode:
            where = ",".join(f"{host}:{port}" for host, port in self.sentinels)
            return f"Sentinel service {self.service!r} via {where}"
        return "one Redis server (MRTR_WORKER_REDIS_URL)"


@dataclass(frozen=True)
class WaitPolicy:
    """Whether writes wait for replicas (`WAIT replicas timeout_ms`); `replicas` 0 sends no WAIT at all."""

    replicas: int = 0
    timeout_ms: int = 500

    @property
    def on(self) -> bool:
        return self.replicas > 0


class NotReplicated(RedisError):
    """The write landed on the primary but fewer replicas than asked acknowledged it in time.

    Redis gives no rollback: the write stays, and a failover before it reaches a replica loses it. Callers
    treat it as unacknowledged (a creation answers an error; a slice's end is retried by its lease)."""

    def __init__(self, acknowledged: int | None, policy: WaitPolicy) -> None:
        seen = "an unknown number" if acknowledged is None else str(acknowledged)
        super().__init__(
            f"written on the Redis primary, but acknowledged by {seen} of {policy.replicas} replica(s) within "
            f"{policy.timeout_ms} ms (WAIT): a failover now may lose it"
        )
        self.acknowledged = acknowledged


def parse_sentinels(entries: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """`host:port` entries (`[v6]:port` too) as pairs; a missing or bad port is a clear error."""
    pairs: list[tuple[str, int]] = []
    for entry in entries:
        host, sep, port = entry.strip().rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"sentinel {entry!r} is not host:port")
        pairs.append((host, int(port)))
    return tuple(pairs)


def connect(target: RedisTarget, *, retries: int, client_name: str | None = None) -> redis.Redis:
    """A client that fails fast and retries a command `retries` times on a dropped connection (with backoff
    0.1, 0.2, 0.4, then 0.5 s), so a restart or a failover that completes within that costs no error.

    `client_name`: the name every connection carries (CLIENT SETNAME), so peers can see this process die."""
    options: dict[str, Any] = {
        "client_name": client_name,
        "decode_responses": True,
        "socket_timeout": SOCKET_TIMEOUT,
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "retry": Retry(ExponentialBackoff(cap=0.5, base=0.05), retries),
        "retry_on_error": [RedisConnectionError, RedisTimeoutError],
    }
    if target.url is not None:
        return redis.Redis.from_url(target.url, **options)
    sentinel = _AskingAll(  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        list(target.sentinels),
        sentinel_kwargs={"socket_timeout": SENTINEL_TIMEOUT, "socket_connect_timeout": SENTINEL_TIMEOUT},
    )
    client: redis.Redis = sentinel.master_for(
        target.service, redis_class=_SentinelClient, connection_pool_class=_FollowingPool, **options
    )
    return client


def newest_primary(states: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Of the sentinels' views of the primary (None: no answer), the valid one with the highest config epoch.

    A sentinel learns of a failover from the others' hello messages, up to two seconds later (longer on a
    starved machine); until then it names the old primary, and once that is awake (a partition healed) it
    passes redis-py's check. The config epoch is the sentinels' own order of configurations.
    """
    valid = [s for s in states if s and s.get("is_master") and not s.get("is_sdown") and not s.get("is_odown")]
    return max(valid, key=lambda s: int(s.get("config-epoch", 0)), default=None)


class _AskingAll(Sentinel):
    """redis-py's Sentinel, asking every sentinel at once and following `newest_primary` (redis-py takes the
    first valid answer in its list)."""

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        replies = await asyncio.gather(*(s.sentinel_masters() for s in self.sentinels), return_exceptions=True)
        states = [r.get(service_name) if isinstance(r, dict) else None for r in replies]
        newest = newest_primary(states)
        if newest is None:
            failed = [f"{s} - {r!r}" for s, r in zip(self.sentinels, replies, strict=True) if isinstance(r, Exception)]
            detail = f": {', '.join(failed)}" if failed else ""
            raise MasterNotFoundError(f"No master found for {service_name!r}{detail}")
        return str(newest["ip"]), int(newest["port"])


class _FollowingPool(SentinelConnectionPool):
    """redis-py's Sentinel pool, asking the sentinels again (at most every `RECHECK_SECONDS`) as a connection
    is taken, and dropping connections to a node they no longer name.

    redis-py asks only when it opens a connection, and keeps using an open one until it fails: one to an old
    primary that was partitioned away (not dead) and came back still answers, as a primary until the sentinels
    demote it (its writes are then lost) and as a replica after (stale reads). Measured by the failover
    benchmark with the old primary paused rather than killed."""

    _checked = 0.0

    async def get_connection(self, *args: Any, **options: Any) -> Any:
        now = time.monotonic()
        if now - self._checked >= RECHECK_SECONDS:
            self._checked = now
            with contextlib.suppress(RedisConnectionError, RedisTimeoutError):
                await self.get_master_address()  # type: ignore[no-untyped-call]  # a change drops idle ones
        return await super().get_connection(*args, **options)  # type: ignore[no-untyped-call]

    async def release(self, connection: Any) -> None:
        if self.master_address is not None and (connection.host, connection.port) != self.master_address:
            await connection.disconnect()  # before it is back in the pool: nobody else is using it yet
        await super().release(connection)


class _SentinelClient(redis.Redis):
    """The primary's client; closing it closes the connections to the sentinels too."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        pool = self.connection_pool
        if isinstance(pool, SentinelConnectionPool):
            await pool.sentinel_manager.aclose()


class ReplicatedPipeline(Pipeline):
    """A MULTI/EXEC transaction that, with a `WaitPolicy` on, sends WAIT after EXEC on the same connection.

    `execute()` raises `NotReplicated` when too few replicas acknowledged; the transaction's writes have
    then landed on the primary (Redis has no rollback). A WAIT that fails on the connection is reported the
    same way rather than raised as a connection error: the pipeline would retry the whole transaction,
    and EXEC has already run.
    """

    def __init__(self, client: redis.Redis, policy: WaitPolicy) -> None:
        super().__init__(client.connection_pool, client.response_callbacks, True, None)
        self.policy = policy
        self.acknowledged: int | None = None

    async def _execute_transaction(self, connection: Connection, commands: Any, raise_on_error: Any) -> Any:
        result = await super()._execute_transaction(connection, commands, raise_on_error)
        if self.policy.on:
            self.acknowledged = await wait_for_replicas(connection, self.policy)
        return result

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        self.acknowledged = None
        result = await super().execute(raise_on_error)
        if self.policy.on and (self.acknowledged is None or self.acknowledged < self.policy.replicas):
            raise NotReplicated(self.acknowledged, self.policy)
        return result


async def wait_for_replicas(connection: Connection, policy: WaitPolicy) -> int | None:
    """WAIT on `connection`: the replicas that acknowledged its writes so far, or None if it could not tell.

    Whenever the answer is not read, the connection is dropped: redis-py answers a read that outlives the
    timeout given to it with None and leaves the connection open, so WAIT's reply, arriving later, would be
    read as the answer to the next command that takes the connection from the pool."""
    try:
        await connection.send_command("WAIT", policy.replicas, policy.timeout_ms)
        reply = await connection.read_response(timeout=policy.timeout_ms / 1000 + SOCKET_TIMEOUT)
    except (RedisError, OSError) as exc:
        logger.warning("WAIT after a committed transaction failed: %s", exc)
        reply = None
    if not isinstance(reply, int):
        await connection.disconnect()
        return None
    return reply
