"""The task store's transactions against a real Redis whose connections drop mid-transaction (as in a restart).

redis-py answers a connection lost between WATCH and EXEC with the same WatchError as a lost race; the
store must tell the two apart, or the runner acknowledges a slice that was never checkpointed and the task
stops for good. Its own Redis: the test kills every client connection but its own.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis

from mrtr_ops.local.redis import RedisServer
from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.keyring import new_ring
from mrtr_worker.tasks.record import READABLE_RECORD_FORMATS, TaskRecord
from mrtr_worker.tasks.sealing import RecordSealer
from mrtr_worker.tasks.store import TaskStore, now_ms
from mrtr_worker.tasks.wire import Status


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(Path(tmp_path_factory.mktemp("redis-drops"))).start()
    yield server
    server.stop()


class DroppingStore(TaskStore):
    """A store whose connection is cut once, after WATCH and before EXEC: what a Redis restart does to it."""

    killer: redis.Redis
    drops = 0

    def _write(self, pipe: Any, record: TaskRecord, rev: int, *, ack: str | None, requeue: bool) -> None:
        if self.drops == 0:
            self.drops += 1
            self.killer.client_kill_filter(_type="normal", skipme=True)
        super()._write(pipe, record, rev, ack=ack, requeue=requeue)


def test_a_connection_dropped_mid_commit_is_retried_not_taken_for_a_lost_race(
    own_redis: RedisServer, redis_server: RedisServer
) -> None:
    del redis_server  # marks the test as one that runs real processes (slow)

    async def scenario() -> None:
        sealer = RecordSealer(FleetStateCodec(new_ring("k"), max_token_bytes=1 << 20), READABLE_RECORD_FORMATS[1])
        client = TaskStore.connect(own_redis.url, sealer, prefix="unused:").client  # the workers' retry settings
        store = DroppingStore(client, sealer, prefix=f"drop-{secrets.token_hex(4)}:")
        store.killer = redis.Redis.from_url(own_redis.url)
        now = now_ms()
        record = TaskRecord(secrets.token_urlsafe(24), None, "count_primes", {}, Status.WORKING, now, now, 60_000, 500)
        try:
            await store.create(record, max_live=10)
            stored = await store.load(record.task_id)
            assert stored is not None
            assert await store.commit(stored, replace(record, steps=5), requeue=True)
            assert store.drops == 1
            after = await store.load(record.task_id)
            assert after is not None
            assert (after.rev, after.record.steps) == (2, 5)
            # A real lost race still loses: the same revision again is refused, nothing written.
            assert not await store.commit(stored, replace(record, steps=9))
            again = await store.load(record.task_id)
            assert again is not None
            assert (again.rev, again.record.steps) == (2, 5)
        finally:
            store.killer.close()
            await store.close()

    asyncio.run(scenario())


def test_a_slice_its_task_still_waits_on_is_never_dropped_as_stale(redis_server: RedisServer) -> None:
    """The runner drops a slice it read as stale; if that read came from an old primary (Sentinel, a partition),
    the slice may be the one its task waits on: `ack` checks again in Redis and keeps it (its lease brings it
    back). On the old `ack` the task was left without a slice and never finished."""

    async def scenario() -> None:
        sealer = RecordSealer(FleetStateCodec(new_ring("k"), max_token_bytes=1 << 20), READABLE_RECORD_FORMATS[1])
        store = TaskStore.connect(redis_server.url, sealer, prefix=f"ack-{secrets.token_hex(4)}:")
        now = now_ms()
        record = TaskRecord(secrets.token_urlsafe(24), None, "count_primes", {}, Status.WORKING, now, now, 60_000, 500)
        try:
            await store.ensure_group()
            await store.create(record, max_live=10)
            taken = await store.take("w1", block_ms=1_000)
            assert taken is not None
            assert (taken.task_id, taken.rev) == (record.task_id, 1)
            assert not await store.ack(taken.message_id)  # the task is still working at revision 1
            assert await store.reclaim("w2", lease_ms=0, count=5) == [taken]  # kept: pending, for the lease
            stored = await store.load(record.task_id)
            assert stored is not None
            assert await store.commit(stored, replace(record, status=Status.CANCELLED))  # it moved on
            assert await store.ack(taken.message_id)
            assert await store.reclaim("w3", lease_ms=0, count=5) == []
            gone = TaskRecord(
                secrets.token_urlsafe(24), None, "count_primes", {}, Status.WORKING, now, now, 60_000, 500
            )
            await store.create(gone, max_live=10)
            again = await store.take("w1", block_ms=1_000)
            assert again is not None
            await store.client.delete(store.task_key(gone.task_id))  # expired
            assert await store.ack(again.message_id)
        finally:
            await store.close()

    asyncio.run(scenario())
