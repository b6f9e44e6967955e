"""At most once: a single-use tool's sealed state is accepted once across the fleet, never twice.

Two worker processes share one Redis (the task store's). `prime_report` is declared single-use in the
demo pack: its answered round creates a task, so a replayed state would create a second one. The state
of its first round is presented to worker A (accepted: a task), then the same request again to worker B
(refused with -32602 before the tool runs, and no second task), then to A again (refused too).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from mrtr_ops.local.process import WorkerSpec
from mrtr_ops.local.redis import RedisServer
from tests.conftest import StartWorker
from tests.worker.tasks.tasks_support import RpcError, TaskClient

PREFIX = "once:"
ANSWER = {"report": {"action": "accept", "content": {"name": "Ada", "limit": 1_000}}}


@pytest.fixture(scope="module")
def pair(start_worker: StartWorker, redis_server: RedisServer) -> tuple[WorkerSpec, WorkerSpec]:
    env = {"MRTR_WORKER_REDIS_URL": redis_server.url, "MRTR_WORKER_REDIS_PREFIX": PREFIX}
    return start_worker(env=env)[0], start_worker(env=env)[0]


@pytest.fixture
def clients(pair: tuple[WorkerSpec, WorkerSpec]) -> Iterator[tuple[TaskClient, TaskClient]]:
    a, b = TaskClient(pair[0].url), TaskClient(pair[1].url)
    yield a, b
    a.close()
    b.close()


def _spent_keys(redis_server: RedisServer) -> list[str]:
    with redis.Redis.from_url(redis_server.url, decode_responses=True) as r:
        return sorted(str(key) for key in r.scan_iter(f"{PREFIX}spent:*"))


def _answered(state: str) -> dict[str, Any]:
    return {"inputResponses": ANSWER, "requestState": state}


def test_a_state_replayed_on_another_instance_is_refused(
    clients: tuple[TaskClient, TaskClient], redis_server: RedisServer
) -> None:
    a, b = clients
    asked = a.call_tool("prime_report")
    assert asked["resultType"] == "input_required"
    spent_before = _spent_keys(redis_server)

    created = a.call_tool("prime_report", params=_answered(asked["requestState"]))
    assert created["resultType"] == "task", created

    for replay_on in (b, a):
        with pytest.raises(RpcError) as refused:
            replay_on.call_tool("prime_report", params=_answered(asked["requestState"]))
        assert refused.value.code == -32602
        assert refused.value.status == 400
        assert "already used" in refused.value.message
        assert refused.value.data == {"reason": "request_state_replayed"}
    assert len(_spent_keys(redis_server)) == len(spent_before) + 1
    assert a.wait_status(created["taskId"])["result"]["structuredContent"] == {
        "name": "Ada",
        "limit": 1_000,
        "count": 168,
    }


def test_the_spent_record_expires_with_the_state(
    clients: tuple[TaskClient, TaskClient], redis_server: RedisServer
) -> None:
    """Redis forgets a spent state by itself, once no instance could accept it any more (TTL + skew allowance)."""
    a, _ = clients
    asked = a.call_tool("prime_report")
    before = set(_spent_keys(redis_server))
    a.call_tool("prime_report", params=_answered(asked["requestState"]))
    (key,) = set(_spent_keys(redis_server)) - before
    with redis.Redis.from_url(redis_server.url, decode_responses=True) as r:
        ttl_ms = r.pttl(key)
        accepted_by = r.get(key)
    assert 0 < ttl_ms <= (600 + 60) * 1000  # the default state TTL plus the clock-skew allowance
    assert ttl_ms > 600 * 1000 - 60_000  # the state's remaining TTL, not a fixed short time
    assert accepted_by is not None


def test_each_new_round_gets_a_new_single_use_state(clients: tuple[TaskClient, TaskClient]) -> None:
    """Asking again (an answer that does not fit the form) spends the state and hands out a fresh one."""
    a, b = clients
    asked = a.call_tool("prime_report")
    bad = {"report": {"action": "accept", "content": {"name": "Ada", "limit": 1}}}  # below the minimum
    again = b.call_tool("prime_report", params={"inputResponses": bad, "requestState": asked["requestState"]})
    assert again["resultType"] == "input_required"
    assert again["requestState"] != asked["requestState"]
    assert a.call_tool("prime_report", params=_answered(again["requestState"]))["resultType"] == "task"
