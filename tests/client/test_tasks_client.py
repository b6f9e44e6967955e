"""The sync and async clients run tasks: the loop driven over HTTP (httpx.MockTransport, a scripted server)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mrtr_client import AsyncClient, Client, ScriptedInputs, TaskExchange, TaskPolicy
from mrtr_protocol.tasks import EXTENSION_ID
from tests.client.scripted_server import ScriptedServer
from tests.client.scripted_server import wire_task as _task

NOW = {"resultType": "complete", "content": [{"type": "text", "text": "now"}]}
FAST = TaskPolicy(default_poll_interval=0.001, min_poll_interval=0.001)
FORM = {
    "method": "elicitation/create",
    "params": {
        "message": "Digits?",
        "requestedSchema": {"type": "object", "properties": {"digits": {"type": "integer"}}},
    },
}


def _client(server: ScriptedServer, inputs: Any = None) -> Client:
    return Client("http://mcp.test/mcp", inputs, http=server.sync_http(), task_policy=FAST)


def test_a_task_is_followed_and_its_questions_answered_by_the_same_handler() -> None:
    server = ScriptedServer(
        [
            _task("t-1", "working"),
            _task("t-1", "input_required", inputRequests={"refine": FORM}),
            _task("t-1", "input_required", inputRequests={"refine": FORM}),
            _task(
                "t-1",
                "completed",
                result={"resultType": "complete", "content": [], "structuredContent": {"pi": 3.14159}},
            ),
        ]
    )
    seen: list[TaskExchange] = []
    with _client(server, ScriptedInputs(forms={"refine": {"digits": 5}})) as client:
        done = client.call_tool("estimate_pi", {"ask_to_refine": True}, task=True, on_task=seen.append)
    assert done.structured == {"pi": 3.14159}
    assert done.task_id == "t-1"
    assert server.methods == ["tools/call", "tasks/get", "tasks/get", "tasks/update", "tasks/get", "tasks/get"]
    update = server.requests[3][2]
    assert update["inputResponses"] == {"refine": {"action": "accept", "content": {"digits": 5}}}
    for method, headers, params in server.requests[1:]:
        assert headers["mcp-name"] == "t-1", method
        assert params["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"] == {EXTENSION_ID: {}}
    assert [x.status for x in seen if x.method == "tasks/get"] == [
        "working",
        "input_required",
        "input_required",
        "completed",
    ]
    assert [p.instance for p in done.trace.polls] == ["w2", "w3", "w5", "w6"]


def test_without_task_the_extension_is_not_declared() -> None:
    server = ScriptedServer([], call_result=NOW)
    with _client(server) as client:
        done = client.call_tool("count_primes", {"limit": 10})
    assert done.text == "now"
    assert "extensions" not in server.requests[0][2]["_meta"]["io.modelcontextprotocol/clientCapabilities"]


def test_a_server_that_makes_no_task_answers_a_task_call_at_once() -> None:
    server = ScriptedServer([], call_result=NOW)
    with _client(server) as client:
        done = client.call_tool("count_primes", {"limit": 10}, task=True)
    assert (done.text, done.task_id, server.methods) == ("now", None, ["tools/call"])


def test_ctrl_c_during_a_poll_cancels_the_task_before_it_goes_on() -> None:
    server = ScriptedServer([_task("t-1", "working")])

    def interrupt() -> None:
        if server.methods.count("tasks/get") == 2:
            raise KeyboardInterrupt

    server.on_get = interrupt
    with _client(server) as client, pytest.raises(KeyboardInterrupt):
        client.call_tool("count_primes", {"limit": 10}, task=True)
    assert server.methods == ["tools/call", "tasks/get", "tasks/get", "tasks/cancel"]
    assert server.requests[-1][2]["taskId"] == "t-1"


def test_ctrl_c_in_the_observer_cancels_the_task() -> None:
    server = ScriptedServer([_task("t-1", "working")])

    def observer(exchange: TaskExchange) -> None:
        if exchange.method == "tasks/get":
            raise KeyboardInterrupt

    with _client(server) as client, pytest.raises(KeyboardInterrupt):
        client.call_tool("count_primes", {"limit": 10}, task=True, on_task=observer)
    assert server.methods == ["tools/call", "tasks/get", "tasks/cancel"]


def test_get_and_cancel_a_task_by_id() -> None:
    server = ScriptedServer([_task("t-9", "working", statusMessage="slice 3/8 on w2", pollIntervalMs=500)])
    with _client(server) as client:
        snapshot = client.get_task("t-9")
        client.cancel_task("t-9")
    assert (snapshot.task_id, snapshot.status, snapshot.status_message) == ("t-9", "working", "slice 3/8 on w2")
    assert snapshot.poll_interval_ms == 500
    assert snapshot.instance == "w1"
    assert server.methods == ["tasks/get", "tasks/cancel"]
    assert [headers["mcp-name"] for _, headers, _ in server.requests] == ["t-9", "t-9"]


async def test_cancelling_the_awaiting_coroutine_cancels_the_task() -> None:
    server = ScriptedServer([_task("t-1", "working", pollIntervalMs=60_000)])
    polled = asyncio.Event()
    server.on_get = polled.set
    http = server.async_http()
    async with AsyncClient("http://mcp.test/mcp", http=http, task_policy=TaskPolicy(max_poll_interval=30)) as client:
        call = asyncio.create_task(client.call_tool("count_primes", {"limit": 10}, task=True))
        await asyncio.wait_for(polled.wait(), 5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    assert server.methods == ["tools/call", "tasks/get", "tasks/cancel"]


async def test_the_async_client_follows_a_task_to_its_result() -> None:
    server = ScriptedServer(
        [
            _task("t-1", "input_required", inputRequests={"a": FORM}),
            _task("t-1", "completed", result={"resultType": "complete", "content": [{"type": "text", "text": "done"}]}),
        ]
    )
    http = server.async_http()
    async with AsyncClient("http://mcp.test/mcp", ScriptedInputs(), http=http, task_policy=FAST) as client:
        done = await client.call_tool("confirm_delete", {"filename": "x"}, task=True)
        snapshot = await client.get_task("t-1")
        await client.cancel_task("t-1")
    assert done.text == "done"
    assert snapshot.status == "completed"
    assert server.methods == ["tools/call", "tasks/get", "tasks/update", "tasks/get", "tasks/get", "tasks/cancel"]
