"""The client follows a task by push (`notifications/tasks` on `subscriptions/listen`), and by polls when it must.

Push end to end runs through the proxy over two workers and Redis (a local cluster whose workers sit
behind cables the test can cut); refusal uses the scripted server, which, like a server without
push, answers a listen with -32601.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mrtr_client import CallResult, Client, RetryPolicy, TaskExchange, TaskPolicy
from mrtr_client._loop import Reply, new_id_source
from mrtr_client._stream import Message, Opened, StreamEnded
from mrtr_client._tasks import follow_task_loop
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.waiting import wait_until
from mrtr_protocol.tasks import (
    LISTEN_TASK_IDS,
    SUBSCRIPTIONS_ACKNOWLEDGED,
    SUBSCRIPTIONS_LISTEN,
    TASKS_GET,
    TASKS_NOTIFICATION,
)
from mrtr_test_packs.conformance_jobs import slow_compute_text
from tests.client.scripted_server import ScriptedServer, wire_task

TEXT = {"resultType": "complete", "content": [{"type": "text", "text": "done"}], "isError": False}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    work_dir: Path = tmp_path_factory.mktemp("cluster")
    config = ClusterConfig(
        workers=2, port=0, work_dir=work_dir, tool_packs=("conformance",), cables=True, ready_timeout=180
    )
    with LocalCluster(config) as started:
        yield started


def _methods(seen: list[TaskExchange]) -> list[str]:
    return [x.method for x in seen]


@pytest.mark.slow
def test_the_result_arrives_by_push_through_the_proxy(cluster: LocalCluster) -> None:
    seen: list[TaskExchange] = []
    with Client(cluster.mcp_url, task_policy=TaskPolicy(max_wait=60)) as client:
        done = client.call_tool("slow_compute", {"seconds": 1.0, "label": "push"}, task=True, on_task=seen.append)
    assert done.text == slow_compute_text(1.0, "push")
    assert TASKS_GET not in _methods(seen)  # not one poll: every change came on the stream
    pushes = [x for x in seen if x.method == TASKS_NOTIFICATION]
    assert pushes[0].status == "working"
    assert pushes[-1].status == "completed"
    assert [x.detail for x in seen if x.method == SUBSCRIPTIONS_LISTEN] == ["listening"]


@pytest.mark.slow
def test_a_stream_cut_mid_task_falls_back_and_loses_nothing(cluster: LocalCluster) -> None:
    seen: list[TaskExchange] = []
    outcome: list[CallResult | BaseException] = []

    def call() -> None:
        with Client(cluster.mcp_url, task_policy=TaskPolicy(max_wait=60)) as client:
            try:
                outcome.append(client.call_tool("slow_compute", {"seconds": 4.0}, task=True, on_task=seen.append))
            except BaseException as exc:  # handed to the test thread below
                outcome.append(exc)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    listening = wait_until(
        lambda: next((x for x in seen if x.method == TASKS_NOTIFICATION), None), timeout=30, what="a first push"
    )
    assert listening.instance is not None
    cluster.cut_worker(listening.instance)  # the proxy can no longer reach the stream's worker: the stream is cut
    try:
        caller.join(timeout=60)
        assert not caller.is_alive()
    finally:
        cluster.restore_worker(listening.instance)
    (done,) = outcome
    assert isinstance(done, CallResult), done
    assert done.text == slow_compute_text(4.0, None)
    listens = [x.detail or "" for x in seen if x.method == SUBSCRIPTIONS_LISTEN]
    assert listens[0] == "listening"
    assert any(detail.startswith("push ended") for detail in listens), listens


def test_a_refused_listen_falls_back_to_polling() -> None:
    server = ScriptedServer([wire_task("t-1", "working"), wire_task("t-1", "completed", result=TEXT)])
    seen: list[TaskExchange] = []
    with Client("http://mcp.test/mcp", http=server.sync_http()) as client:
        done = client.call_tool("count_primes", {"limit": 10}, task=True, on_task=seen.append)
    assert done.result == TEXT
    assert server.listens == 1  # tried once, refused, never again for this task
    assert server.methods.count(TASKS_GET) >= 2
    (refused,) = [x for x in seen if x.method == SUBSCRIPTIONS_LISTEN]
    assert refused.detail == "push refused: -32601 Method not found"


def _drive(loop: Any, answers: dict[str, list[Any]]) -> tuple[CallResult, list[str]]:
    """Run an I/O-free task loop: each step kind takes its next scripted answer; returns the result and the steps."""
    kinds: list[str] = []
    step = next(loop)
    try:
        while True:
            kind = type(step).__name__
            kinds.append(kind)
            value = answers[kind].pop(0) if kind in answers else None
            if isinstance(value, dict) and "jsonrpc" in value:  # a reply to a Send: stamped with its id
                value = reply(step.request_id, value["result"])
            step = loop.send(value)
    except StopIteration as done:
        return done.value, kinds


def reply(request_id: int, result: dict[str, Any]) -> Reply:
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()
    return Reply(200, {"content-type": "application/json", "x-worker-id": "w1"}, body, 1.0)


def _ack(task_id: str) -> Message:
    params = {"notifications": {LISTEN_TASK_IDS: [task_id]}}
    return Message({"jsonrpc": "2.0", "method": SUBSCRIPTIONS_ACKNOWLEDGED, "params": params}, 1.0)


def test_a_stream_that_keeps_ending_is_given_up_for_polls_and_the_result_still_comes() -> None:
    working, completed = wire_task("t-1", "working"), wire_task("t-1", "completed", result=TEXT)
    rpc = {"jsonrpc": "2.0"}
    policy = TaskPolicy(max_relistens=1, default_poll_interval=0.01, min_poll_interval=0.01)
    loop = follow_task_loop("t-1", {}, new_id_source(), RetryPolicy(), policy)
    answers: dict[str, list[Any]] = {
        "Send": [{**rpc, "result": working}, {**rpc, "result": working}, {**rpc, "result": completed}],
        "OpenStream": [Opened("s1", {"x-worker-id": "w2"}, 1.0), Opened("s2", {"x-worker-id": "w3"}, 1.0)],
        "ReadStream": [
            _ack("t-1"),
            Message({"jsonrpc": "2.0", "method": TASKS_NOTIFICATION, "params": working}, 1.0),
            StreamEnded("cut", 1.0),
            _ack("t-1"),
            StreamEnded(None, 1.0),
        ],
    }
    done, kinds = _drive(loop, answers)
    assert done.result == TEXT
    steps = [k for k in kinds if k != "Observe"]
    assert steps == [
        *["Send", "OpenStream", "ReadStream", "ReadStream", "ReadStream", "CloseStream", "Sleep", "Send"],
        *["OpenStream", "ReadStream", "ReadStream", "CloseStream", "Sleep", "Send"],  # the second end: polls only
    ]
    listens = [x.detail for x in done.trace.task_exchanges if x.method == SUBSCRIPTIONS_LISTEN]
    assert listens[-1] == "push ended (the stream closed); polling from now on"
    assert len(done.trace.pushes) == 1
