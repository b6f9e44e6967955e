"""Fencing of task slices against a real Redis: a slice taken from a worker can never be committed by it.

Two consumers of the same slice, driven step by step through the store (no runner loops), so each
interleaving is exact: the *zombie* began the slice, then lost it (its lease taken over, or its
worker judged dead) while it was frozen; the *taker* began it next. The zombie's boundary check and
its commit must be refused whether or not the taker has committed yet (before fencing, a commit
compared only the revision, which the taker leaves unchanged until its own commit). Then the
presence side: a worker whose connections are gone is seen dead at once, and its slices claimed once.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

import pytest
import redis.asyncio as aioredis

from mrtr_ops.local.redis import RedisServer
from mrtr_ops.waiting import wait_until_async
from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.keyring import new_ring
from mrtr_worker.tasks.leases import Check, Lease, SliceLeases
from mrtr_worker.tasks.presence import Presence, client_name
from mrtr_worker.tasks.record import READABLE_RECORD_FORMATS, TaskRecord
from mrtr_worker.tasks.sealing import RecordSealer
from mrtr_worker.tasks.store import GROUP, Slice, Stored, TaskStore, now_ms
from mrtr_worker.tasks.wire import Status

T = TypeVar("T")
RING = new_ring("k")


def _run(scenario: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(scenario())  # type: ignore[arg-type]


def _store(url: str, prefix: str, name: str | None = None) -> TaskStore:
    sealer = RecordSealer(FleetStateCodec(RING, max_token_bytes=1 << 20), READABLE_RECORD_FORMATS[1])
    return TaskStore.connect(url, sealer, prefix=prefix, client_name=name)


def _record() -> TaskRecord:
    now = now_ms()
    state = {"limit": 1_000_000, "segment": 100_000, "next": 2, "count": 0}
    return TaskRecord(secrets.token_urlsafe(24), None, "count_primes", state, Status.WORKING, now, now, 60_000, 500)


async def _history(store: TaskStore, leases: SliceLeases) -> list[dict[str, str]]:
    entries: Any = await store.client.xrange(leases.history)
    return [dict(fields) for _, fields in entries]


async def _first_slice(store: TaskStore, consumer: str) -> Slice:
    await store.ensure_group()
    taken = await store.take(consumer, 1000)
    assert taken is not None
    return taken


async def _begun(leases: SliceLeases, taken: Slice, consumer: str) -> tuple[Lease, Stored]:
    begun = await leases.begin(taken, consumer)
    assert not isinstance(begun, Check), begun
    return begun


def _advanced(stored: Stored, steps: int) -> TaskRecord:
    return replace(stored.record, steps=stored.record.steps + steps, state={**stored.record.state, "next": 99})


async def _steal(store: TaskStore, taken: Slice, consumer: str) -> None:
    """What a takeover does to the message (XAUTOCLAIM after the lease, or `Presence.take_over`)."""
    await store.client.xclaim(store.stream, GROUP, consumer, 0, [taken.message_id])


@pytest.fixture
def prefix() -> str:
    return f"fence-{secrets.token_hex(4)}:"


@pytest.mark.parametrize("taker_committed_first", [False, True])
def test_a_zombie_cannot_commit_a_slice_taken_from_it(
    redis_server: RedisServer, prefix: str, taker_committed_first: bool
) -> None:
    async def scenario() -> None:
        store = _store(redis_server.url, prefix)
        leases = SliceLeases(store, group=GROUP, history_max=1000)
        record = _record()
        await store.create(record, max_live=10)
        taken = await _first_slice(store, "zombie")
        zombie, at_zombie = await _begun(leases, taken, "zombie")
        assert await leases.check(zombie, "zombie", at_zombie.rev) is Check.HELD
        # The zombie freezes; its slice is taken over and begun elsewhere from the same checkpoint.
        await _steal(store, taken, "taker")
        assert await leases.check(zombie, "zombie", at_zombie.rev) is Check.FENCED  # even before the taker began
        taker, at_taker = await _begun(leases, taken, "taker")
        assert taker.token > zombie.token
        assert taker.deliveries == 2
        assert at_taker.rev == at_zombie.rev  # nothing committed yet: the revision alone cannot tell them apart
        if taker_committed_first:
            assert await leases.commit(taker, "taker", at_taker, _advanced(at_taker, 3), requeue=True) is Check.HELD
        # The zombie wakes: its renewal does not take the message back, and its commit is refused.
        assert await leases.check(zombie, "zombie", at_zombie.rev) is Check.FENCED
        refused = await leases.commit(zombie, "zombie", at_zombie, _advanced(at_zombie, 5), requeue=True)
        assert refused is Check.FENCED
        pending: Any = await store.client.xpending_range(store.stream, GROUP, min="-", max="+", count=10)
        if not taker_committed_first:
            assert [(p["message_id"], p["consumer"]) for p in pending] == [(taken.message_id, "taker")]
            assert await leases.commit(taker, "taker", at_taker, _advanced(at_taker, 3), requeue=True) is Check.HELD
        after = await store.load(record.task_id)
        assert after is not None
        assert after.record.steps == 3  # the taker's steps, never the zombie's
        assert after.rev == at_zombie.rev + 1
        commits = [e for e in await _history(store, leases) if e["kind"] == "commit"]
        assert [(e["worker"], e["outcome"], e["from"], e["to"]) for e in commits if e["outcome"] == "ok"] == [
            ("taker", "ok", "0", "3")
        ]
        assert [(e["worker"], e["token"]) for e in commits if e["outcome"] == "fenced"] == [
            ("zombie", str(zombie.token))
        ]
        checks = [(e["worker"], e["token"]) for e in await _history(store, leases) if e["kind"] == "check"]
        assert checks == [("zombie", str(zombie.token))] * 2  # each refused boundary is on record too
        begins = [
            (e["worker"], e["token"], e["deliveries"]) for e in await _history(store, leases) if e["kind"] == "begin"
        ]
        assert begins == [("zombie", str(zombie.token), "1"), ("taker", str(taker.token), "2")]
        await store.close()

    _run(scenario)


def test_a_commit_retried_after_its_reply_was_lost_is_not_taken_for_a_refusal(
    redis_server: RedisServer, prefix: str
) -> None:
    """redis-py sends a script again when the connection drops before the reply: the second run finds its own
    commit already there and says so, instead of reporting the slice stale (which would drop it)."""

    async def scenario() -> None:
        store = _store(redis_server.url, prefix)
        leases = SliceLeases(store, group=GROUP)
        record = _record()
        await store.create(record, max_live=10)
        taken = await _first_slice(store, "w")
        lease, stored = await _begun(leases, taken, "w")
        script: Any = leases._commit  # the registered script, called twice with the same arguments
        calls: list[Any] = []
        original = script.__call__

        async def twice(*args: Any, **kwargs: Any) -> Any:
            calls.append(await original(*args, **kwargs))
            return await original(*args, **kwargs)

        leases._commit = twice  # type: ignore[assignment]
        assert await leases.commit(lease, "w", stored, _advanced(stored, 2), requeue=True) is Check.HELD
        assert [str(c) for c in calls] == ["held"]
        after = await store.load(record.task_id)
        assert after is not None
        assert (after.rev, after.record.steps) == (stored.rev + 1, 2)
        await store.close()

    _run(scenario)


def test_a_cancelled_task_stops_its_slice_at_the_next_boundary_and_acknowledges_it(
    redis_server: RedisServer, prefix: str
) -> None:
    async def scenario() -> None:
        store = _store(redis_server.url, prefix)
        leases = SliceLeases(store, group=GROUP)
        record = _record()
        await store.create(record, max_live=10)
        taken = await _first_slice(store, "w")
        lease, stored = await _begun(leases, taken, "w")
        await store.mutate(record.task_id, lambda r: (r.moved(Status.CANCELLED, now_ms()), False))
        assert await leases.check(lease, "w", stored.rev) is Check.STALE
        pending: Any = await store.client.xpending(store.stream, GROUP)
        assert pending["pending"] == 0  # acknowledged: nothing left to redeliver
        await store.close()

    _run(scenario)


def _named(url: str, prefix: str, consumer: str, dead_ms: int = 60_000) -> tuple[TaskStore, Presence]:
    """A worker's store with named connections, and its presence (by default a heartbeat that lives a minute)."""
    incarnation = secrets.token_hex(4)
    store = _store(url, prefix, client_name(prefix, consumer, incarnation))
    return store, Presence(store, group=GROUP, consumer=consumer, incarnation=incarnation, dead_ms=dead_ms)


async def _beat_for_a_minute(store: TaskStore, presence: Presence) -> None:
    """A live worker beats every `beat_ms` for as long as it runs: one beat that lives a minute stands for them.

    A judge's `dead_ms` is short only so that it trusts its connection list soon; its own heartbeat, written
    with that expiry, would lapse while it waits (the wait is at least `dead_ms`), and a loaded machine could
    then see the judge itself dead.
    """
    await store.client.set(presence.alive_key(presence.consumer), presence.incarnation, px=60_000)


async def _trusting_connections(presence: Presence) -> None:
    """Until the judge's own connection is older than its `dead_ms`: only then does it read the connection list."""
    await wait_until_async(presence.sees_connections, timeout=30, interval=0.1, what="the judge's connection to age")


def test_a_worker_whose_connections_are_gone_is_seen_dead_at_once_and_its_slices_claimed_once(
    redis_server: RedisServer, prefix: str
) -> None:
    """Its heartbeat key has a minute to live: only the closed connections tell (what `kill -9` leaves)."""

    async def scenario() -> None:
        stores = {"victim": _named(redis_server.url, prefix, "victim")}
        stores |= {name: _named(redis_server.url, prefix, name, dead_ms=1000) for name in ("a", "b")}
        victim_store = stores["victim"][0]
        await victim_store.ensure_group()
        for store, presence in stores.values():
            await _beat_for_a_minute(store, presence)
        for _ in range(3):
            await victim_store.create(_record(), max_live=10)
            assert await victim_store.take("victim", 1000) is not None
        _, a = stores["a"]
        b_store, b = stores["b"]
        await _trusting_connections(a)
        assert await a.dead() == []  # alive: its key and its connections are there
        await victim_store.close()  # its connections close, as a killed process's do
        seen = await a.dead()
        assert [(d.consumer, d.pending) for d in seen] == [("victim", 3)]
        first = await a.take_over(seen[0], 2)
        second = await b.take_over(seen[0], 5)  # judged at the same moment by another worker
        third = await b.take_over(seen[0], 5)
        assert len(first) == 2
        assert len(second) == 1
        assert third == []
        assert {s.message_id for s in first}.isdisjoint({s.message_id for s in second})
        assert await b.dead() == []  # nothing left pending under the dead worker
        plain = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
        consumers: Any = await plain.xinfo_consumers(b_store.stream, GROUP)
        await plain.aclose()
        assert {c["name"]: c["pending"] for c in consumers} == {"victim": 0, "a": 2, "b": 1}
        for name, (store, _) in stores.items():
            if name != "victim":
                await store.close()

    _run(scenario)


def test_a_judge_whose_own_connection_is_new_does_not_trust_the_connection_list(
    redis_server: RedisServer, prefix: str
) -> None:
    """Just after a failover or a restart every connection is new: a live worker whose client has not reconnected
    yet has none there. Until its own connection is older than `dead_ms`, the judge goes by heartbeats alone."""

    async def scenario() -> None:
        victim_store, victim = _named(redis_server.url, prefix, "quiet")
        judge_store, judge = _named(redis_server.url, prefix, "judge", dead_ms=5_000)
        await victim_store.ensure_group()
        await victim.beat()
        await judge.beat()
        await victim_store.create(_record(), max_live=10)
        assert await victim_store.take("quiet", 1000) is not None
        await victim_store.close()  # no connection left, but its heartbeat key lives a minute
        assert not await judge.sees_connections()
        assert await judge.dead() == []
        await judge_store.close()

    _run(scenario)


def test_a_worker_that_came_back_under_its_name_is_not_taken_over(redis_server: RedisServer, prefix: str) -> None:
    """Judged dead, then restarted (same name, a new incarnation beating) before the claim: the claim is void."""

    async def scenario() -> None:
        old_store, old = _named(redis_server.url, prefix, "w1")
        a_store, a = _named(redis_server.url, prefix, "a", dead_ms=1000)
        await old_store.ensure_group()
        await old.beat()
        await _beat_for_a_minute(a_store, a)
        await old_store.create(_record(), max_live=10)
        assert await old_store.take("w1", 1000) is not None
        await _trusting_connections(a)
        await old_store.close()
        seen = await a.dead()
        assert [d.consumer for d in seen] == ["w1"]
        new_store, new = _named(redis_server.url, prefix, "w1")
        await new.beat()  # the restart says it is alive before the claim lands
        assert await a.take_over(seen[0], 5) == []
        await new_store.close()
        await a_store.close()

    _run(scenario)
