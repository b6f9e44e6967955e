"""A slice's lease, fenced: only the worker that began a slice last may go on with it or commit it.

The slice queue hands a slice (a stream message) to one worker, but a
message can change hands while its worker still runs: the lease ran out
(XAUTOCLAIM), or the worker was judged dead (`tasks.presence`) while it was
only frozen or cut off. Such a *zombie* wakes up with the checkpoint it
started from, and two things would let it through:

* a commit that compares only the record's revision: a slice taken over but
  not yet committed by its new holder leaves the revision unchanged, so a
  zombie reaching the end of its slice first would commit over it;
* a lease renewal (XCLAIM with min-idle 0) would take the message back from
  the new holder, and steps counted as they run
  (`mrtr_worker_compute_steps_total`) would count work never committed.

So every slice starts with `begin`: one script that checks this worker still
holds the message and bumps the task's fencing token (`lease` in the task's
hash). Every step boundary (`check`) and the commit (`commit`) run as scripts
that go on only if the token is still the one this worker got *and* the
message is still pending for this worker; anything else is `fenced`, and the
worker drops the slice without acknowledging it (it is someone else's now).
A commit is atomic with the checkpoint, the acknowledgement and the next
slice's message, and a worker counts a slice's steps only once
its commit landed. With the store's wait policy on (Sentinel,
`MRTR_WORKER_REDIS_WAIT_REPLICAS`), the commit script runs inside the store's
transaction and waits for the replicas like any acknowledging write.

When `history_max` is above 0, each begin, each commit attempt (landed or
refused, and why) and each step boundary refused as fenced is also appended to the `history` stream in the same
script, so the record of what was committed is exactly what Redis kept:
the chaos run's checker reads it (`mrtr_ops.history`).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from mrtr_worker.tasks.record import TaskRecord
from mrtr_worker.tasks.store import Slice, Stored, TaskStore, now_ms
from mrtr_worker.tasks.wire import Status

HISTORY_KEY = "history"
"""The history stream's key, after the store's prefix."""


class Check(StrEnum):
    """What a step boundary or a commit found."""

    HELD = "held"
    """Still this worker's slice (a boundary renewed its lease; a commit landed)."""
    FENCED = "fenced"
    """Another worker took the slice: stop, acknowledge nothing, count nothing."""
    STALE = "stale"
    """The task moved on without the slice (cancelled, expired, or written since): the slice was acknowledged."""


@dataclass(frozen=True)
class Lease:
    """A slice this worker began: the message, the token it got, and the task as the slice found it."""

    taken: Slice
    token: int
    deliveries: int
    """How many times the queue handed this slice out (1: first delivery; more: taken over)."""
    started: float = field(default_factory=time.monotonic)
    """When this worker began the slice (monotonic): its run time counts from here."""


_BEGIN = """
local pending = redis.call('XPENDING', KEYS[2], ARGV[1], ARGV[2], ARGV[2], 1)
if #pending == 0 or pending[1][2] ~= ARGV[3] then return {'lost'} end
local deliveries = pending[1][4]
local v = redis.call('HMGET', KEYS[1], 'rec', 'rev', 'status')
if not v[1] or v[2] ~= ARGV[6] or v[3] ~= 'working' then
  redis.call('XACK', KEYS[2], ARGV[1], ARGV[2])
  redis.call('XDEL', KEYS[2], ARGV[2])
  return {'stale'}
end
local token = redis.call('HINCRBY', KEYS[1], 'lease', 1)
redis.call('HSET', KEYS[1], 'holder', ARGV[3])
if tonumber(ARGV[4]) > 0 then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'kind', 'begin', 'task', ARGV[5], 'worker', ARGV[3],
    'msg', ARGV[2], 'rev', v[2], 'token', token, 'deliveries', deliveries)
end
return {'ok', v[1], v[2], token, deliveries}
"""
"""KEYS: task, stream, history. ARGV: group, message, consumer, history max, task id, the slice's revision."""

_CHECK = """
local function fenced()
  if tonumber(ARGV[6]) > 0 then
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[6], '*', 'kind', 'check', 'outcome', 'fenced', 'task', ARGV[7],
      'worker', ARGV[3], 'msg', ARGV[2], 'token', ARGV[4], 'rev', ARGV[5])
  end
  return 'fenced'
end
local v = redis.call('HMGET', KEYS[1], 'status', 'rev', 'lease')
if v[3] and v[3] ~= ARGV[4] then return fenced() end
local pending = redis.call('XPENDING', KEYS[2], ARGV[1], ARGV[2], ARGV[2], 1)
if #pending == 0 or pending[1][2] ~= ARGV[3] then return fenced() end
if not v[1] or v[1] ~= 'working' or v[2] ~= ARGV[5] then
  redis.call('XACK', KEYS[2], ARGV[1], ARGV[2])
  redis.call('XDEL', KEYS[2], ARGV[2])
  return 'stale'
end
redis.call('XCLAIM', KEYS[2], ARGV[1], ARGV[3], 0, ARGV[2], 'JUSTID')
return 'held'
"""
"""KEYS: task, stream, history. ARGV: group, message, consumer, token, revision, history max, task id. Renews the
lease only if still held; a refusal is logged (a zombie stopped at a step boundary)."""

_COMMIT = """
local function log(outcome, rev)
  if tonumber(ARGV[14]) > 0 then
    redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[14], '*', 'kind', 'commit', 'outcome', outcome,
      'task', ARGV[13], 'worker', ARGV[3], 'msg', ARGV[2], 'token', ARGV[4], 'rev', rev,
      'from', ARGV[15], 'to', ARGV[16], 'status', ARGV[8])
  end
end
local v = redis.call('HMGET', KEYS[1], 'rev', 'lease', 'commit')
local expected = tonumber(ARGV[5])
if v[1] and tonumber(v[1]) == expected + 1 and v[3] == ARGV[6] then return 'held' end
if v[1] and v[2] ~= ARGV[4] then log('fenced', expected + 1) return 'fenced' end
local pending = redis.call('XPENDING', KEYS[3], ARGV[1], ARGV[2], ARGV[2], 1)
if #pending == 0 or pending[1][2] ~= ARGV[3] then log('fenced', expected + 1) return 'fenced' end
if not v[1] or tonumber(v[1]) ~= expected then
  redis.call('XACK', KEYS[3], ARGV[1], ARGV[2])
  redis.call('XDEL', KEYS[3], ARGV[2])
  log('stale', expected + 1)
  return 'stale'
end
redis.call('HSET', KEYS[1], 'rec', ARGV[7], 'rev', expected + 1, 'status', ARGV[8], 'commit', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[9])
if ARGV[10] == '1' then
  redis.call('ZREM', KEYS[2], ARGV[13])
else
  redis.call('ZADD', KEYS[2], ARGV[11], ARGV[13])
  redis.call('PEXPIRE', KEYS[2], ARGV[9])
end
redis.call('XACK', KEYS[3], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[3], ARGV[2])
if ARGV[12] == '1' then redis.call('XADD', KEYS[3], '*', 'task', ARGV[13], 'rev', expected + 1) end
redis.call('PUBLISH', KEYS[4], ARGV[13])
log('ok', expected + 1)
return 'held'
"""
"""KEYS: task, live set, stream, changes channel, history. ARGV: group, message, consumer, token, revision, commit
id, sealed record, status, TTL ms, terminal, live score, requeue, task id, history max, steps from, steps to.

A retried commit whose first attempt landed (the reply was lost with the connection: a Redis restart) finds its
own commit id at the next revision and answers `held` again, rather than `stale`."""


class SliceLeases:
    """Begin, check and commit slices through the store's Redis, each one script (atomic)."""

    def __init__(self, store: TaskStore, *, group: str, history_max: int = 0) -> None:
        self._store = store
        self._group = group
        self.history_max = history_max
        self.history = store.key(HISTORY_KEY)
        client = store.client
        self._begin = client.register_script(_BEGIN)
        self._check = client.register_script(_CHECK)
        self._commit = client.register_script(_COMMIT)

    async def begin(self, taken: Slice, consumer: str) -> tuple[Lease, Stored] | Check:
        """Fence the slice for this worker and read the task; STALE (acknowledged) or FENCED if not to run."""
        store = self._store
        keys = [store.task_key(taken.task_id), store.stream, self.history]
        args: list[str | int] = [self._group, taken.message_id, consumer, self.history_max, taken.task_id, taken.rev]
        reply: Any = await self._begin(keys=keys, args=args)
        outcome = str(reply[0])
        if outcome == "lost":
            return Check.FENCED
        if outcome == "stale":
            return Check.STALE
        sealed, rev, token, deliveries = str(reply[1]), int(reply[2]), int(reply[3]), int(reply[4])
        stored = Stored(store.open(taken.task_id, sealed), rev)
        return Lease(taken, token, deliveries), stored

    async def check(self, lease: Lease, consumer: str, rev: int) -> Check:
        """At a step boundary: still this worker's slice and the task still working at `rev`? Renews the lease."""
        store = self._store
        task_id = lease.taken.task_id
        keys = [store.task_key(task_id), store.stream, self.history]
        args: list[str | int] = [
            self._group,
            lease.taken.message_id,
            consumer,
            lease.token,
            rev,
            self.history_max,
            task_id,
        ]
        return Check(str(await self._check(keys=keys, args=args)))

    async def commit(self, lease: Lease, consumer: str, stored: Stored, record: TaskRecord, *, requeue: bool) -> Check:
        """Write the slice's checkpoint (or end), acknowledge the slice and queue the next one, if still held."""
        store = self._store
        task_id = record.task_id
        keys = [store.task_key(task_id), store.live_key(record.principal), store.stream, store.changes, self.history]
        args: list[str | int] = [
            self._group,
            lease.taken.message_id,
            consumer,
            lease.token,
            stored.rev,
            secrets.token_hex(8),
            store.seal(record),
            record.status.value,
            record.ttl_ms,
            "1" if record.terminal else "0",
            now_ms() + record.ttl_ms,
            "1" if requeue and record.status is Status.WORKING else "0",
            task_id,
            self.history_max,
            stored.record.steps,
            record.steps,
        ]
        if not store.wait.on:
            return Check(str(await self._commit(keys=keys, args=args)))
        async with store.transaction() as pipe:  # the script inside MULTI/EXEC, then WAIT for the replicas
            await self._commit(keys=keys, args=args, client=pipe)
            replies = await pipe.execute()  # NotReplicated: landed on the primary, not confirmed by replicas
        return Check(str(replies[0]))
