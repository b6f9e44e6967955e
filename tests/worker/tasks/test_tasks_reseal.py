"""Key rotation covers task records: `POST /admin/tasks/reseal` moves every record onto the new primary.

A task record lives up to its task TTL (an hour) but is re-sealed only when written, while the rolling
upgrade retires the old key one *state* TTL after the promotion. Without the reseal, a task completed
(or waiting in input_required) under the old key would become unreadable at retirement. One real worker,
one real Redis, the ring file rotated as an operator does it; Redis is read raw to see what is stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from mcp.server.request_state import AESGCMRequestStateCodec

from mrtr_ops.local.process import WorkerSpec
from mrtr_ops.local.redis import RedisServer
from mrtr_worker.sealing.keyring import KeyRing, new_ring, new_secret
from mrtr_worker.tasks.sealing import fingerprint
from tests.conftest import StartWorker
from tests.worker.tasks.tasks_support import RpcError, TaskClient

PREFIX = "reseal:"
TTL_MS = 600_000
BOGUS = f"{PREFIX}task:no-key-opens-this"


@pytest.fixture(scope="module")
def ring_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("reseal") / "ring.json"
    path.write_text(new_ring("a").dumps())
    return path


@pytest.fixture(scope="module")
def worker(start_worker: StartWorker, redis_server: RedisServer, ring_file: Path) -> WorkerSpec:
    env = {
        "MRTR_WORKER_REDIS_URL": redis_server.url,
        "MRTR_WORKER_REDIS_PREFIX": PREFIX,
        "MRTR_WORKER_TASK_TTL_MS": str(TTL_MS),
    }
    return start_worker(tool_packs=("conformance",), keyring_path=ring_file, env=env)[0]


@pytest.fixture
def raw(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    yield client
    client.close()


def _rotate(spec: WorkerSpec, ring_file: Path, ring: KeyRing) -> None:
    ring_file.write_text(ring.dumps())
    assert httpx.post(f"{spec.url}/admin/keyring/reload", timeout=10).json()["primary_key"] == ring.primary


def _reseal(spec: WorkerSpec) -> dict[str, Any]:
    response = httpx.post(f"{spec.url}/admin/tasks/reseal", timeout=30)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _fingerprint_of(ring: KeyRing, name: str) -> bytes | None:
    return fingerprint(AESGCMRequestStateCodec([ring.keys[name]]).seal(b""))


def test_reseal_keeps_tasks_readable_after_the_old_key_retires(
    worker: WorkerSpec, ring_file: Path, raw: redis.Redis
) -> None:
    client = TaskClient(worker.url)
    try:
        done_id = client.create("slow_compute", {"seconds": 0})
        result = client.wait_status(done_id)["result"]
        waiting_id = client.create("confirm_delete", {"filename": "resealed.txt"})
        (question,) = client.wait_status(waiting_id, "input_required")["inputRequests"]
        raw.hset(BOGUS, mapping={"rec": "v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "rev": 1})

        ring = KeyRing.parse(ring_file.read_text()).with_key("b", new_secret()).promoted("b")
        keys = {task_id: f"{PREFIX}task:{task_id}" for task_id in (done_id, waiting_id)}
        before = {task_id: raw.hgetall(key) for task_id, key in keys.items()}
        ttl_before = {task_id: raw.pttl(key) for task_id, key in keys.items()}
        assert all(fingerprint(str(rec["rec"])) == _fingerprint_of(ring, "a") for rec in before.values())
        _rotate(worker, ring_file, ring)

        assert _reseal(worker) == {"resealed": 2, "current": 0, "unreadable": 1, "skipped": 0}
        for task_id, key in keys.items():
            after = raw.hgetall(key)
            assert fingerprint(str(after["rec"])) == _fingerprint_of(ring, "b")
            assert after["rev"] == before[task_id]["rev"]  # a queued slice carries rev: it must stay valid
            assert after["status"] == before[task_id]["status"]
            assert 0 < raw.pttl(key) <= ttl_before[task_id]  # HSET kept the expiry; a write would reset it
        assert raw.hget(BOGUS, "rec") == "v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"  # left as it was
        assert _reseal(worker) == {"resealed": 0, "current": 2, "unreadable": 1, "skipped": 0}

        _rotate(worker, ring_file, ring.without_key("a"))
        assert client.get(done_id)["result"] == result
        client.update(waiting_id, {question: {"action": "accept", "content": {"confirm": True}}})
        assert client.wait_status(waiting_id)["result"]["content"][0]["text"] == "Deleted resealed.txt"

        raw.hset(keys[done_id], "rec", before[done_id]["rec"])  # what it would hold without the reseal
        with pytest.raises(RpcError) as unreadable:
            client.get(done_id)
        assert unreadable.value.data == {"reason": "unreadable_task"}
    finally:
        raw.delete(BOGUS)
        client.close()
