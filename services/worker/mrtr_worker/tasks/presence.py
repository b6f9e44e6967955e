"""Which task workers are alive, seen from Redis, so a dead one's slices move on at once instead of after a lease.

Two signs, both read from the one Redis every worker already talks to:

* **its connections**: every connection of a worker's task store carries a
  client name (`CLIENT SETNAME`) with the worker's consumer name and a
  random *incarnation* drawn at start. A process killed with `kill -9`
  loses its sockets with it; the kernel closes them and Redis drops the
  clients at once, so `CLIENT LIST` no longer shows that incarnation;
* **its heartbeat**: `alive:{consumer}` holds the incarnation with a short
  expiry (`dead_ms`), written every `beat_ms`. A frozen (SIGSTOP) or cut off
  worker keeps its sockets but stops beating: the key expires.

A worker with slices pending in the group is dead when its heartbeat key is
gone or no connection of the incarnation it names is left. A live worker
then claims that consumer's pending slices (`take_over`, one script: it
claims only while the heartbeat key still reads what the judgement saw, so
two claimers never both take a slice, and a worker restarted under the same
name in between is left alone). A worker wrongly judged dead (a long stall
on a starved machine) loses nothing but the work since its last commit: the
fencing of `tasks.leases` refuses its next boundary and its commit.

A worker judges others only once its own heartbeat has gone through for a
whole `dead_ms` in a row, with no gap longer than `dead_ms` between two
beats: after a Redis restart or a failover every key may be gone, and a
worker that was itself stalled that long cannot tell others' silence from
its own. And it trusts the connection list only once its own connection to
this Redis is older than `dead_ms` (the `age` CLIENT LIST shows): after a
failover every connection is new, and a live worker whose client has not
reconnected yet has none there.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any, cast

from redis.exceptions import ResponseError

from mrtr_worker.tasks.store import Slice, TaskStore, slice_from

CLIENT_NAME_PREFIX = "mrtr-task"

_TAKE_OVER = """
local alive = redis.call('GET', KEYS[2])
if (alive or '') ~= ARGV[4] then return {} end
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', tonumber(ARGV[5]), ARGV[2])
if #pending == 0 then return {} end
local ids = {}
for i, entry in ipairs(pending) do ids[i] = entry[1] end
return redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, unpack(ids))
"""
"""KEYS: stream, the dead consumer's heartbeat key. ARGV: group, dead consumer, claimer, the heartbeat value judged
dead ('' for none), count. XCLAIM without JUSTID counts a delivery: the new holder sees the slice was taken over."""


def client_name(prefix: str, consumer: str, incarnation: str) -> str:
    """The name every connection of this worker's store carries (no spaces: Redis refuses them)."""
    return _clean(f"{CLIENT_NAME_PREFIX}:{prefix}{consumer}:{incarnation}")


def new_incarnation() -> str:
    return secrets.token_hex(6)


def _clean(text: str) -> str:
    return re.sub(r"\s", "_", text)


@dataclass(frozen=True)
class Dead:
    """A consumer judged dead, and what its heartbeat key read when judged ('' for none)."""

    consumer: str
    seen: str
    pending: int


class Presence:
    """This worker's heartbeat, and the judgement of the others."""

    def __init__(self, store: TaskStore, *, group: str, consumer: str, incarnation: str, dead_ms: int) -> None:
        self._store = store
        self._group = group
        self.consumer = consumer
        self.incarnation = incarnation
        self.dead_ms = dead_ms
        self._take_over = store.client.register_script(_TAKE_OVER)
        self._names_supported = True

    def alive_key(self, consumer: str) -> str:
        return self._store.key(f"alive:{consumer}")

    async def beat(self) -> None:
        await self._store.client.set(self.alive_key(self.consumer), self.incarnation, px=self.dead_ms)

    async def leave(self) -> None:
        """Say this worker is gone (a clean stop): anything it still holds moves on at once."""
        key = self.alive_key(self.consumer)
        if await self._store.client.get(key) == self.incarnation:
            await self._store.client.delete(key)

    async def dead(self) -> list[Dead]:
        """Other consumers of the group holding slices whose worker is gone (see the module docstring)."""
        client = self._store.client
        consumers: Any = await client.xinfo_consumers(self._store.stream, self._group)
        holding = {
            str(c["name"]): int(c.get("pending", 0))
            for c in consumers
            if int(c.get("pending", 0)) > 0 and str(c["name"]) != self.consumer
        }
        if not holding:
            return []
        names = list(holding)
        seen = cast(list[str | None], await client.mget([self.alive_key(name) for name in names]))
        connected = await self._connected()
        found = []
        for name, alive in zip(names, seen, strict=True):
            gone = alive is None or (
                connected is not None and client_name(self._store.prefix, name, alive) not in connected
            )
            if gone:
                found.append(Dead(name, alive or "", holding[name]))
        return found

    async def sees_connections(self) -> bool:
        """Whether the connection list counts in the judgement now (see `_connected`)."""
        return await self._connected() is not None

    async def _connected(self) -> set[str] | None:
        """The names of the clients connected now; None if this Redis user may not list them, or if this worker's
        own connection here is younger than `dead_ms` (a Redis just restarted or promoted: others may not have
        reconnected yet)."""
        if not self._names_supported:
            return None
        try:
            clients: Any = await self._store.client.client_list(_type="normal")
        except ResponseError:  # NOPERM: an ACL without CLIENT LIST; the heartbeat alone judges
            self._names_supported = False
            return None
        mine = client_name(self._store.prefix, self.consumer, self.incarnation)
        age = max((int(c.get("age", 0)) for c in clients if c.get("name") == mine), default=0)
        if age * 1000 < self.dead_ms:
            return None
        return {str(c.get("name")) for c in clients if c.get("name")}

    async def take_over(self, dead: Dead, count: int) -> list[Slice]:
        """Claim up to `count` of a dead consumer's pending slices for this worker (none if it came back)."""
        store = self._store
        keys = [store.stream, self.alive_key(dead.consumer)]
        args: list[str | int] = [self._group, dead.consumer, self.consumer, dead.seen, count]
        reply: Any = await self._take_over(keys=keys, args=args)
        taken = []
        for entry in reply or []:
            if not entry or entry[1] is None:
                continue  # deleted since: nothing to run
            fields = entry[1]
            pairs = dict(zip(fields[0::2], fields[1::2], strict=True)) if isinstance(fields, list) else dict(fields)
            taken.append(slice_from(str(entry[0]), {str(k): str(v) for k, v in pairs.items()}))
        return taken
