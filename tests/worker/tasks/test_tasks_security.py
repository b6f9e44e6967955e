"""Security of tasks: sealed at rest (and across a key rotation), bound to their principal, capped per
principal, removed by Redis once their TTL has passed since their last activity.

A real worker trusting the development issuer (anonymous calls allowed too, as in local
development) and a real Redis, read raw to check what a copy of it would reveal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import redis

from mrtr_dev_issuer import PUBLIC_KEY_NAME, DevIssuer
from mrtr_ops.local.process import WorkerSpec
from mrtr_ops.local.redis import RedisServer
from mrtr_ops.waiting import wait_until
from mrtr_worker.config import WorkerSettings
from mrtr_worker.sealing.keyring import KeyRing, new_secret
from tests.conftest import StartWorker
from tests.worker.tasks.tasks_support import RpcError, TaskClient

PREFIX = "sec:"
MAX_LIVE = 3
DEFAULT_POLL_MS = WorkerSettings.model_fields["task_poll_interval_ms"].default
"""The refusal's retry hint: the tasks' poll interval (not set here)."""
SECRET_FILENAME = "merger-with-initech-2027.txt"
SECRET_NAME = "Ms Quartermaine-Vesper"


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> tuple[DevIssuer, Path]:
    directory = tmp_path_factory.mktemp("issuer")
    return DevIssuer.ensure(directory), directory / PUBLIC_KEY_NAME


@pytest.fixture(scope="module")
def secure_worker(start_worker: StartWorker, redis_server: RedisServer, issuer: tuple[DevIssuer, Path]) -> WorkerSpec:
    env = {
        "MRTR_WORKER_REDIS_URL": redis_server.url,
        "MRTR_WORKER_REDIS_PREFIX": PREFIX,
        "MRTR_WORKER_JWT_PUBLIC_KEY_FILE": str(issuer[1]),
        "MRTR_WORKER_MAX_LIVE_TASKS": str(MAX_LIVE),
    }
    return start_worker(tool_packs=("conformance",), env=env)[0]


@pytest.fixture
def clients(secure_worker: WorkerSpec, issuer: tuple[DevIssuer, Path]) -> Iterator[dict[str, TaskClient]]:
    made = {
        "alice": TaskClient(secure_worker.url, token=issuer[0].mint("alice")),
        "bob": TaskClient(secure_worker.url, token=issuer[0].mint("bob")),
        "anonymous": TaskClient(secure_worker.url),
    }
    yield made
    for client in made.values():
        client.close()


def _raw_dump(url: str) -> str:
    """Everything the task store holds under our prefix, as one text: what a copy of Redis would reveal."""
    raw = redis.Redis.from_url(url, decode_responses=True)
    parts: list[str] = []
    try:
        for key in raw.scan_iter(f"{PREFIX}*"):
            kind = raw.type(key)
            parts.append(key)
            if kind == "hash":
                parts.append(repr(raw.hgetall(key)))
            elif kind == "stream":
                parts.append(repr(raw.xrange(key)))
            elif kind == "zset":
                parts.append(repr(raw.zrange(key, 0, -1)))
            else:
                parts.append(repr(raw.dump(key)))
    finally:
        raw.close()
    return "\n".join(parts)


def test_records_are_sealed_at_rest(clients: dict[str, TaskClient], redis_server: RedisServer) -> None:
    alice = clients["alice"]
    deleting = alice.create("confirm_delete", {"filename": SECRET_FILENAME})
    paused = alice.wait_status(deleting, "input_required", timeout=10)
    alice.update(deleting, {key: {"action": "accept", "content": {"confirm": True}} for key in paused["inputRequests"]})
    asking = alice.create("multi_input")
    keys = list(alice.wait_status(asking, "input_required", timeout=10)["inputRequests"])
    alice.update(asking, {keys[0]: {"action": "accept", "content": {"name": SECRET_NAME}}})
    assert SECRET_FILENAME in alice.wait_status(deleting)["result"]["content"][0]["text"]
    dump = _raw_dump(redis_server.url)
    assert deleting in dump  # the keys are there...
    assert SECRET_FILENAME not in dump  # ...but neither the arguments, nor the result,
    assert SECRET_NAME not in dump  # nor an answer
    assert "merger" not in dump
    alice.cancel(asking)


def test_another_principal_sees_no_task(clients: dict[str, TaskClient]) -> None:
    alice, bob, anonymous = clients["alice"], clients["bob"], clients["anonymous"]
    task_id = alice.create("slow_compute", {"seconds": 60})
    with pytest.raises(RpcError) as unknown:
        bob.get("Z" * 32)
    attempts: list[Callable[[TaskClient], object]] = [
        lambda c: c.get(task_id),
        lambda c: c.update(task_id, {"x": {"action": "accept", "content": {}}}),
        lambda c: c.cancel(task_id),
    ]
    for stranger in (bob, anonymous):
        for attempt in attempts:
            with pytest.raises(RpcError) as raised:
                attempt(stranger)
            assert raised.value.code == unknown.value.code == -32602
            assert raised.value.data == unknown.value.data
    assert alice.get(task_id)["status"] == "working"  # the stranger's cancel did nothing
    alice.cancel(task_id)


def test_anonymous_tasks_stay_anonymous(clients: dict[str, TaskClient]) -> None:
    anonymous, alice = clients["anonymous"], clients["alice"]
    task_id = anonymous.create("slow_compute", {"seconds": 0.2})
    assert anonymous.wait_status(task_id)["status"] == "completed"
    with pytest.raises(RpcError) as raised:
        alice.get(task_id)
    assert raised.value.code == -32602


def test_live_tasks_are_capped_per_principal(clients: dict[str, TaskClient]) -> None:
    bob, alice = clients["bob"], clients["alice"]
    held = [bob.create("slow_compute", {"seconds": 600}) for _ in range(MAX_LIVE)]
    with pytest.raises(RpcError) as raised:
        bob.call_tool("slow_compute", {"seconds": 600})
    assert raised.value.data == {"reason": "task_limit", "max": MAX_LIVE, "retryAfterMs": DEFAULT_POLL_MS}
    assert "Too many unfinished tasks" in raised.value.message
    other = alice.create("slow_compute", {"seconds": 600})  # another principal has its own allowance
    bob.cancel(held[0])  # a finished task frees its place
    held[0] = bob.create("slow_compute", {"seconds": 600})
    for task_id in held:
        bob.cancel(task_id)
    alice.cancel(other)


def test_key_rotation_keeps_tasks_readable(
    start_worker: StartWorker, redis_server: RedisServer, tmp_path: Path, keyring: KeyRing
) -> None:
    ring_file = tmp_path / "ring.json"
    ring_file.write_text(keyring.dumps())
    env = {"MRTR_WORKER_REDIS_URL": redis_server.url, "MRTR_WORKER_REDIS_PREFIX": "rot:"}
    spec, _ = start_worker(tool_packs=("conformance",), keyring_path=ring_file, env=env)
    client = TaskClient(spec.url)
    try:
        task_id = client.create("confirm_delete", {"filename": "rotated.txt"})
        (key,) = client.wait_status(task_id, "input_required", timeout=10)["inputRequests"]  # sealed under test-1
        ring_file.write_text(keyring.with_key("test-2", new_secret()).promoted("test-2").dumps())
        reloaded = httpx.post(f"{spec.url}/admin/keyring/reload", timeout=10)
        assert reloaded.json()["primary_key"] == "test-2"
        client.update(task_id, {key: {"action": "accept", "content": {"confirm": True}}})  # opens old, seals new
        assert client.wait_status(task_id)["result"]["content"][0]["text"] == "Deleted rotated.txt"
    finally:
        client.close()


def test_ttl_counts_from_last_activity_and_redis_removes_the_task(
    start_worker: StartWorker, redis_server: RedisServer
) -> None:
    ttl_ms = 3_000
    env = {
        "MRTR_WORKER_REDIS_URL": redis_server.url,
        "MRTR_WORKER_REDIS_PREFIX": "ttl:",
        "MRTR_WORKER_TASK_TTL_MS": str(ttl_ms),
    }
    spec, _ = start_worker(tool_packs=("conformance",), env=env)
    client = TaskClient(spec.url)
    raw = redis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        task_id = client.create("slow_compute", {"seconds": 1})
        done = client.wait_status(task_id)
        assert done["ttlMs"] == ttl_ms
        remaining = raw.pttl(f"ttl:task:{task_id}")
        assert 0 < remaining <= ttl_ms  # counted from the completion (the last write), not from creation
        wait_until(lambda: raw.exists(f"ttl:task:{task_id}") == 0, timeout=30, what="Redis to expire the task")
        with pytest.raises(RpcError) as raised:
            client.get(task_id)
        assert raised.value.code == -32602
    finally:
        raw.close()
        client.close()
