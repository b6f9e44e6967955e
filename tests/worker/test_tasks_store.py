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
from mrtr_worker.keyring import new_ring
from mrtr_worker.state_codec import FleetStateCodec
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
