"""Task writes that wait for a replica (Redis `WAIT`), against a real primary and replica.

Redis counts for WAIT only the writes of the connection it is sent on, so the store sends it on the
transaction's own connection: sent on another one whose earlier writes the replica has (measured on
Redis 7.0), it answers at once that the replica has everything, and a write no replica has would be
acknowledged. A stopped replica (SIGSTOP: it keeps its connection and acknowledges nothing) shows which.
"""

from __future__ import annotations

import asyncio
import secrets
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from mrtr_ops.local.redis import RedisServer
from mrtr_ops.waiting import wait_until
from mrtr_worker.redis_link import NotReplicated, WaitPolicy, wait_for_replicas
from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.keyring import new_ring
from mrtr_worker.tasks.leases import Check, Lease, SliceLeases
from mrtr_worker.tasks.record import READABLE_RECORD_FORMATS, TaskRecord
from mrtr_worker.tasks.sealing import RecordSealer
from mrtr_worker.tasks.store import GROUP, Stored, TaskStore, now_ms
from mrtr_worker.tasks.wire import Status

pytestmark = pytest.mark.slow  # a primary and a replica, real processes


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RedisServer, RedisServer]]:
    primary = RedisServer(Path(tmp_path_factory.mktemp("wait-primary"))).start()
    replica = RedisServer(Path(tmp_path_factory.mktemp("wait-replica")))
    replica.options = ["--replicaof", "127.0.0.1", str(primary.port), "--repl-diskless-sync-delay", "0"]
    replica.start()
    link = redis.Redis(port=replica.port, decode_responses=True)
    wait_until(lambda: link.info("replication").get("master_link_status") == "up", timeout=30, what="the replica")
    link.close()
    yield primary, replica
    replica.stop()
    primary.stop()


def _store(primary: RedisServer, policy: WaitPolicy) -> TaskStore:
    sealer = RecordSealer(FleetStateCodec(new_ring("k"), max_token_bytes=1 << 20), READABLE_RECORD_FORMATS[1])
    return TaskStore.connect(primary.url, sealer, prefix=f"wait-{secrets.token_hex(4)}:", wait=policy)


def _record() -> TaskRecord:
    now = now_ms()
    return TaskRecord(secrets.token_urlsafe(24), None, "count_primes", {}, Status.WORKING, now, now, 60_000, 500)


def _on(server: RedisServer, store: TaskStore, task_id: str) -> bool:
    client = redis.Redis(port=server.port)
    try:
        return bool(client.exists(store.task_key(task_id)))
    finally:
        client.close()


def test_with_wait_on_a_creation_and_a_checkpoint_are_on_the_replica_when_acknowledged(
    pair: tuple[RedisServer, RedisServer],
) -> None:
    primary, replica = pair

    async def scenario() -> None:
        store = _store(primary, WaitPolicy(1, 2_000))
        try:
            record = _record()
            await store.create(record, max_live=10)
            assert _on(replica, store, record.task_id)  # no polling: WAIT already waited for it
            stored = await store.load(record.task_id)
            assert stored is not None
            assert await store.commit(stored, replace(record, steps=3), requeue=True)
            copy = redis.Redis(port=replica.port, decode_responses=True)
            assert copy.hget(store.task_key(record.task_id), "rev") == "2"
            copy.close()
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_write_no_replica_confirms_is_not_acknowledged_but_stays_on_the_primary(
    pair: tuple[RedisServer, RedisServer],
) -> None:
    primary, replica = pair
    process = replica.popen
    assert process is not None

    async def scenario() -> None:
        waiting, plain = _store(primary, WaitPolicy(1, 300)), _store(primary, WaitPolicy(0, 300))
        try:
            warm = _record()
            await waiting.create(warm, max_live=10)  # this connection has acknowledged writes before
            process.send_signal(signal.SIGSTOP)
            try:
                record = _record()
                started = time.monotonic()
                with pytest.raises(NotReplicated, match="acknowledged by 0 of 1 replica"):
                    await waiting.create(record, max_live=10)
                assert time.monotonic() - started >= 0.3  # it waited the timeout out, on its own connection
                assert _on(primary, waiting, record.task_id)  # Redis has no rollback: the write stays
                stored = await waiting.load(warm.task_id)
                assert stored is not None
                with pytest.raises(NotReplicated):
                    await waiting.commit(stored, replace(warm, steps=1), requeue=True)
                # Without WAIT the same write is acknowledged at once: nothing asked the replica.
                unasked = _record()
                await plain.create(unasked, max_live=10)
                assert _on(primary, plain, unasked.task_id)
            finally:
                process.send_signal(signal.SIGCONT)
        finally:
            await waiting.close()
            await plain.close()

    asyncio.run(scenario())


def test_a_wait_whose_answer_is_late_drops_its_connection(pair: tuple[RedisServer, RedisServer]) -> None:
    """A primary that stops answering mid-WAIT (paused: a partition): the late answer must never be read as the
    answer to the next command on that connection (it was: an int where a list was due, in the benchmark)."""
    primary, _ = pair
    process = primary.popen
    assert process is not None

    async def scenario() -> None:
        client = aioredis.Redis(port=primary.port, decode_responses=True)
        connection = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            await connection.send_command("SET", "test:late", "1")
            assert await connection.read_response() == "OK"
            process.send_signal(signal.SIGSTOP)
            try:
                assert await wait_for_replicas(connection, WaitPolicy(1, 100)) is None  # the read timed out
            finally:
                process.send_signal(signal.SIGCONT)
            await connection.send_command("PING")
            assert await connection.read_response() == "PONG"  # a fresh connection, not WAIT's late answer
        finally:
            await client.connection_pool.release(connection)
            await client.aclose()

    asyncio.run(scenario())


def test_a_slices_fenced_commit_waits_for_the_replica_too(pair: tuple[RedisServer, RedisServer]) -> None:
    """The runner's commit is a script (`tasks.leases`), not a WATCH transaction: it must wait the same way."""
    primary, replica = pair
    process = replica.popen
    assert process is not None

    async def scenario() -> None:
        store = _store(primary, WaitPolicy(1, 300))
        leases = SliceLeases(store, group=GROUP)
        try:
            await store.ensure_group()
            record = _record()
            await store.create(record, max_live=10)

            async def begun() -> tuple[Lease, Stored]:
                taken = await store.take("w1", 1000)
                assert taken is not None
                began = await leases.begin(taken, "w1")
                assert not isinstance(began, Check), began
                return began

            lease, stored = await begun()
            assert await leases.commit(lease, "w1", stored, replace(record, steps=2), requeue=True) is Check.HELD
            copy = redis.Redis(port=replica.port, decode_responses=True)
            assert copy.hget(store.task_key(record.task_id), "rev") == "2"  # WAIT already waited for it
            copy.close()

            lease, stored = await begun()
            process.send_signal(signal.SIGSTOP)
            try:
                with pytest.raises(NotReplicated, match="acknowledged by 0 of 1 replica"):
                    await leases.commit(lease, "w1", stored, replace(record, steps=4), requeue=True)
                landed = await store.load(record.task_id)
                assert landed is not None
                assert landed.rev == 3  # on the primary: Redis has no rollback
            finally:
                process.send_signal(signal.SIGCONT)
        finally:
            await store.close()

    asyncio.run(scenario())
