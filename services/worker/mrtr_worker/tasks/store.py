"""Task records, the per-principal cap and the queue of runnable slices, all in one Redis.

Every write is one optimistic transaction (WATCH the task, check `rev`, MULTI/EXEC), or for a slice's
commit one fenced script (`tasks.leases`): the checkpoint, the acknowledgement of the slice just run and
the message of the next one land together or not at all, so a slice is never lost and never runs from a
stale checkpoint. The keys, key rotation and what waits for replicas: `docs/tasks.md`, "The Redis layout".
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

import redis.asyncio as redis
from redis.exceptions import ResponseError, WatchError

from mrtr_worker import redis_link
from mrtr_worker.redis_link import RedisTarget, ReplicatedPipeline, WaitPolicy
from mrtr_worker.tasks.principal import principal_digest
from mrtr_worker.tasks.record import TaskRecord, UnreadableRecord
from mrtr_worker.tasks.sealing import RecordSealer
from mrtr_worker.tasks.wire import Status

GROUP = "workers"
_RETRIES = 20
_COMMAND_RETRIES = 5
_RESEAL_ATTEMPTS = 3
_SCAN_BATCH = 200
_FORGET_RUNNER_MS = 3_600_000
"""Workers not heard from for an hour leave the `runners` set."""
NO_WAIT = WaitPolicy()

logger = logging.getLogger(__name__)


class CapReached(Exception):
    """The principal already holds the maximum of unfinished tasks."""


@dataclass(frozen=True)
class Stored:
    record: TaskRecord
    rev: int


@dataclass(frozen=True)
class Slice:
    """One runnable slice taken from the stream: its message id and the revision it was queued for."""

    message_id: str
    task_id: str
    rev: int


@dataclass
class ResealCounts:
    """What one `reseal_all` pass did: records moved to the primary, already on it, and ones no key opens.

    `skipped`: records that kept changing under the pass (each change was a write, which seals with the
    primary anyway) or vanished (expired) between SCAN and the read."""

    resealed: int = 0
    current: int = 0
    unreadable: int = 0
    skipped: int = 0


ResealOutcome = Literal["resealed", "current", "unreadable", "skipped"]

Mutation = Callable[[TaskRecord], tuple[TaskRecord, bool] | None]
"""Given the current record: the new record and whether to queue a slice, or None to leave it as is."""


def now_ms() -> int:
    return int(time.time() * 1000)


class TaskStore:
    def __init__(self, client: redis.Redis, sealer: RecordSealer, *, prefix: str, wait: WaitPolicy = NO_WAIT) -> None:
        self.client = client
        self.wait = wait
        """Replicas every write of a task waits for (`transaction`); off by default."""
        self._sealer = sealer
        self.prefix = prefix
        self.stream = f"{prefix}slices"
        self._ack_if_stale = client.register_script(_ACK_IF_STALE)
        self.changes = f"{prefix}task-changes"
        self.runners = f"{prefix}runners"
        self.runner_rates = f"{prefix}runner-rates"

    @classmethod
    def connect(
        cls,
        target: RedisTarget | str,
        sealer: RecordSealer,
        *,
        prefix: str,
        wait: WaitPolicy = NO_WAIT,
        client_name: str | None = None,
    ) -> TaskStore:
        """A client that fails fast (a task call waits at most a few seconds for an unreachable Redis) and
        retries a command a few times on a dropped connection, so a Redis restart costs no error once it is back.

        Five retries back off 0.1 + 0.2 + 0.4 + 0.5 + 0.5 s: a restart (stop, start on the same data) took
        0.4 to 0.6 s on a loaded two-core machine, too close to the 0.7 s that three retries allowed.

        `target`: a URL, or sentinels (`mrtr_worker.redis_link`): then every new connection asks them for the
        primary, so the same retries carry a command across a failover that completes within them.
        `client_name`: the name every connection carries (`tasks.presence`: how peers see this worker die)."""
        where = RedisTarget(url=target) if isinstance(target, str) else target
        client = redis_link.connect(where, retries=_COMMAND_RETRIES, client_name=client_name)
        return cls(client, sealer, prefix=prefix, wait=wait)

    def transaction(self) -> ReplicatedPipeline:
        """A MULTI/EXEC pipeline for a task's write: with `wait` on, its `execute()` also waits for the replicas
        (WAIT on the same connection) and raises `NotReplicated` when too few acknowledged in time. Every
        write that acknowledges a creation or a checkpoint goes through here (`tasks.leases` too)."""
        return ReplicatedPipeline(self.client, self.wait)

    def key(self, name: str) -> str:
        """A key of this store (under its prefix)."""
        return f"{self.prefix}{name}"

    def task_key(self, task_id: str) -> str:
        return f"{self.prefix}task:{task_id}"

    def seal(self, record: TaskRecord) -> str:
        return self._sealer.seal(record)

    def open(self, task_id: str, sealed: str) -> TaskRecord:
        """The record from its sealed text (`UnreadableRecord` if this worker cannot read it)."""
        return self._sealer.open(task_id, sealed)

    def live_key(self, principal: str | None) -> str:
        return f"{self.prefix}live:{principal_digest(principal)}"

    async def close(self) -> None:
        await self.client.aclose()

    async def ping(self) -> bool:
        return bool(await self.client.ping())

    async def ensure_group(self) -> None:
        """Create the stream and its consumer group if missing (every worker does; the first one wins)."""
        try:
            await self.client.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    # Records.

    async def create(self, record: TaskRecord, max_live: int) -> None:
        """Store a new task (and queue its first slice when it is working), unless the principal is at the cap.

        Returns only once Redis has the record: a `tasks/get` right after creation always finds it.
        """
        key, live = self.task_key(record.task_id), self.live_key(record.principal)
        sealed = self._sealer.seal(record)
        for _ in range(_RETRIES):
            now = now_ms()
            await self.client.zremrangebyscore(live, "-inf", now)  # tasks that expired unfinished hold no place
            async with self.transaction() as pipe:
                try:
                    await pipe.watch(live)
                    if await pipe.zcard(live) >= max_live:
                        raise CapReached
                    pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                    pipe.hset(key, mapping={"rec": sealed, "rev": 1, "status": record.status.value})
                    pipe.pexpire(key, record.ttl_ms)
                    pipe.zadd(live, {record.task_id: now + record.ttl_ms})
                    pipe.pexpire(live, record.ttl_ms)
                    if record.status is Status.WORKING:
                        pipe.xadd(self.stream, {"task": record.task_id, "rev": 1})
                    pipe.publish(self.changes, record.task_id)
                    await pipe.execute()
                    return
                except WatchError:
                    continue
        raise RuntimeError("task creation kept conflicting; try again")

    async def load(self, task_id: str) -> Stored | None:
        values = cast(list[str | None], await self.client.hmget(self.task_key(task_id), ["rec", "rev"]))
        sealed, rev = values[0], values[1]
        if sealed is None or rev is None:
            return None
        return Stored(self._sealer.open(task_id, sealed), int(rev))

    async def commit(
        self, stored: Stored, record: TaskRecord, *, ack: str | None = None, requeue: bool = False
    ) -> bool:
        """Write `record` if the task is still at `stored.rev`; with it, acknowledge `ack` and queue the next slice.

        False (nothing written, nothing acknowledged) when another write came first.

        A WatchError is not enough to say so: redis-py raises it too when the connection drops between
        WATCH and EXEC (a Redis restart), and a runner that took that for a lost race would drop the
        task's slice. So the revision is looked at again, on a fresh connection, and only a new one
        means another write came first.
        """
        key = self.task_key(record.task_id)
        for _ in range(_RETRIES):
            async with self.transaction() as pipe:
                try:
                    await pipe.watch(key)
                    rev = await pipe.hget(key, "rev")
                    if rev is None or int(rev) != stored.rev:
                        return False
                    self._write(pipe, record, stored.rev + 1, ack=ack, requeue=requeue)
                    await pipe.execute()
                    return True
                except WatchError:
                    continue
        return False

    def _write(self, pipe: Any, record: TaskRecord, rev: int, *, ack: str | None, requeue: bool) -> None:
        key, live = self.task_key(record.task_id), self.live_key(record.principal)
        pipe.multi()
        pipe.hset(key, mapping={"rec": self._sealer.seal(record), "rev": rev, "status": record.status.value})
        pipe.pexpire(key, record.ttl_ms)
        if record.terminal:
            pipe.zrem(live, record.task_id)
        else:
            pipe.zadd(live, {record.task_id: now_ms() + record.ttl_ms})
            pipe.pexpire(live, record.ttl_ms)
        if ack is not None:
            pipe.xack(self.stream, GROUP, ack)
            pipe.xdel(self.stream, ack)  # acknowledged slices leave the stream: it holds only runnable work
        if requeue:
            pipe.xadd(self.stream, {"task": record.task_id, "rev": rev})
        pipe.publish(self.changes, record.task_id)  # inside MULTI: published only if the write lands

    async def mutate(self, task_id: str, change: Mutation) -> Stored | None:
        """Apply `change` to the current record, retrying on conflicts; None when the task does not exist."""
        for _ in range(_RETRIES):
            stored = await self.load(task_id)
            if stored is None:
                return None
            outcome = change(stored.record)
            if outcome is None:
                return stored
            record, requeue = outcome
            if await self.commit(stored, record, requeue=requeue):
                return Stored(record, stored.rev + 1)
        raise RuntimeError(f"task {task_id}: too many concurrent changes; try again")

    # Key rotation.

    async def reseal_all(self, *, batch: int = _SCAN_BATCH) -> ResealCounts:
        """Re-seal every task record not under the current primary key (see the module docstring)."""
        counts = ResealCounts()
        head, cursor = self.task_key(""), 0
        while True:
            cursor, found = await self.client.scan(cursor, match=f"{_glob_escape(head)}*", count=batch, _type="HASH")
            keys = [str(key) for key in found]
            for key, outcome in zip(keys, await self._reseal_batch(keys), strict=True):
                if outcome is None:  # not under the primary when first read: moved under WATCH
                    outcome = await self._reseal(key, key[len(head) :])
                setattr(counts, outcome, getattr(counts, outcome) + 1)
            if cursor == 0:
                break
        logger.info("task records resealed: %s", counts)
        return counts

    async def _reseal_batch(self, keys: list[str]) -> list[ResealOutcome | None]:
        """One round trip for a SCAN batch: "current" for records already under the primary (most of them
        on a second pass), None for those to move (measured: a WATCH per record cost 2 ms on a loaded box)."""
        async with self.client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hget(key, "rec")
            sealed = cast(list[str | None], await pipe.execute())
        return [
            None if rec is not None and not self._sealer.is_current(rec) else ("current" if rec else "skipped")
            for rec in sealed
        ]

    async def _reseal(self, key: str, task_id: str) -> ResealOutcome:
        """One record: the name of the `ResealCounts` field it counts under."""
        for _ in range(_RESEAL_ATTEMPTS):
            async with self.transaction() as pipe:
                try:
                    await pipe.watch(key)
                    sealed = cast(str | None, await pipe.hget(key, "rec"))
                    if sealed is None:
                        return "skipped"
                    if self._sealer.is_current(sealed):
                        return "current"
                    try:
                        resealed = self._sealer.reseal(task_id, sealed)
                    except UnreadableRecord as exc:
                        logger.error("task %s unreadable, left as is: %s", task_id, exc)
                        return "unreadable"
                    pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                    pipe.hset(key, "rec", resealed)  # rec only: rev, status and the expiry stay
                    await pipe.execute()
                    return "resealed"
                except WatchError:
                    continue  # a writer came first (sealing with the primary), or the connection dropped: look again
        return "skipped"

    # The slice queue.

    async def take(self, consumer: str, block_ms: int) -> Slice | None:
        """The next new slice for this consumer (leased to it until acknowledged), waiting up to `block_ms`."""
        reply: Any = await self.client.xreadgroup(GROUP, consumer, {self.stream: ">"}, count=1, block=block_ms)
        for _stream, messages in reply or []:
            for message_id, fields in messages:
                return slice_from(message_id, fields)
        return None

    async def reclaim(self, consumer: str, lease_ms: int, count: int) -> list[Slice]:
        """Slices whose lease ran out (their worker died or hung), now leased to this consumer."""
        reply: Any = await self.client.xautoclaim(self.stream, GROUP, consumer, lease_ms, start_id="0-0", count=count)
        messages = reply[1] if len(reply) > 1 else []
        return [slice_from(message_id, fields) for message_id, fields in messages if fields]

    async def heartbeat(self, consumer: str, rates: dict[str, float] | None = None) -> None:
        """Say this worker takes slices (`runners`, scored by when): what `peers` counts. Stream consumers
        cannot tell it: Redis 7.0 lists a consumer only once it has been handed a message. `rates`: its recent
        step rates per job (`tasks.straggling.Standing`), for `peer_rates`."""
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.zadd(self.runners, {consumer: now_ms()})
            pipe.zremrangebyscore(self.runners, "-inf", now_ms() - _FORGET_RUNNER_MS)
            if rates is not None:
                pipe.hset(self.runner_rates, consumer, json.dumps(rates))
            await pipe.execute()

    async def peers(self, consumer: str, within_ms: int) -> int:
        """Other workers that said they take slices within the last `within_ms`: whether a slice put back could
        be taken by anyone but `consumer` (the straggler rule has nowhere to send it otherwise)."""
        seen = cast(list[str], await self.client.zrangebyscore(self.runners, now_ms() - within_ms, "+inf"))
        return sum(1 for name in seen if name != consumer)

    async def peer_rates(self, consumer: str, within_ms: int) -> list[dict[str, float]]:
        """The step rates per job of the other workers heard from within `within_ms` (one dict each); the rates
        of workers not heard from in that time are removed (each writes its own again with its heartbeat)."""
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.zrangebyscore(self.runners, now_ms() - within_ms, "+inf")
            pipe.hgetall(self.runner_rates)
            seen, raw = await pipe.execute()
        gone = [name for name in raw if name not in seen and name != consumer]
        if gone:  # workers not heard from lately: their rates would only pile up (a new name every deployment)
            await self.client.hdel(self.runner_rates, *gone)
        rates: list[dict[str, float]] = []
        for name in seen:
            if name == consumer:
                continue
            try:
                doc = json.loads(raw.get(name) or "{}")
            except ValueError:
                doc = {}
            valid = (
                {job: float(rate) for job, rate in doc.items() if isinstance(rate, int | float)}
                if isinstance(doc, dict)
                else {}
            )
            rates.append(valid)
        return rates

    async def oldest_waiting_ms(self) -> int | None:
        """How long the oldest slice no worker has taken yet has waited in the queue (by Redis's clock), or None.

        Acknowledged slices leave the stream, so the entries after the group's last delivered id are exactly
        the slices waiting for a worker; an entry id starts with the millisecond it was added.
        """
        groups: Any = await self.client.xinfo_groups(self.stream)
        last = next((g.get("last-delivered-id") for g in groups if g.get("name") == GROUP), None)
        if last is None:
            return None
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.xrange(self.stream, min=f"({last}", max="+", count=1)
            pipe.time()
            entries, (seconds, micros) = await pipe.execute()
        if not entries:
            return None
        added = int(str(entries[0][0]).split("-", 1)[0])
        return max(0, int(seconds) * 1000 + int(micros) // 1000 - added)

    async def put_back(self, taken: Slice) -> None:
        """Hand a slice this worker cannot run to the others, unchanged (same revision), in one step."""
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.xack(self.stream, GROUP, taken.message_id)
            pipe.xdel(self.stream, taken.message_id)
            pipe.xadd(self.stream, {"task": taken.task_id, "rev": taken.rev})
            await pipe.execute()

    async def ack(self, message_id: str) -> bool:
        """Drop a slice found stale: acknowledged and deleted, unless its task still waits on it.

        The runner decides a slice is stale from what it read (the task gone, at another revision, not
        working). In Sentinel mode that read may have reached an old primary that came back from a
        partition, which answers from an older past for up to the client's recheck: acknowledging on the
        real primary then would leave the task with no slice at all. So the check is made again, in Redis,
        next to the acknowledgement (one script): a slice whose task is still working at its revision stays
        pending, and comes back through its lease. False: kept."""
        return bool(
            await self._ack_if_stale(keys=[self.stream], args=[GROUP, message_id, self.task_key(""), "working"])
        )


_ACK_IF_STALE = """
local entry = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
if #entry == 1 then
  local fields, task, rev = entry[1][2], nil, nil
  for i = 1, #fields, 2 do
    if fields[i] == 'task' then task = fields[i + 1] elseif fields[i] == 'rev' then rev = fields[i + 1] end
  end
  if task then
    -- the task's key is built here, not passed in KEYS: fine on one Redis (and Sentinel), not on a cluster
    local current = redis.call('HMGET', ARGV[3] .. task, 'rev', 'status')
    if current[1] == rev and current[2] == ARGV[4] then return 0 end
  end
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return 1
"""
"""`ack`: acknowledge and delete a slice unless the task it names is still working at the revision it carries."""


def _glob_escape(text: str) -> str:
    """`text` matched literally in a SCAN MATCH pattern (a prefix may hold glob characters)."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def slice_from(message_id: str, fields: dict[str, str]) -> Slice:
    return Slice(message_id, str(fields.get("task", "")), int(fields.get("rev", "0") or 0))
