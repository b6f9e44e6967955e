"""The sync and async clients run tasks: the loop driven over HTTP (httpx.MockTransport, a scripted server)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from mrtr_client import AsyncClient, Client, ScriptedInputs, TaskExchange, TaskPolicy
from mrtr_protocol.instance import WORKER_ID_HEADER
from mrtr_protocol.tasks import EXTENSION_ID

FAST = TaskPolicy(default_poll_interval=0.001, min_poll_interval=0.001)
FORM = {
    "method": "elicitation/create",
    "params": {
        "message": "Digits?",
        "requestedSchema": {"type": "object", "properties": {"digits": {"type": "integer"}}},
    },
}


def _task(task_id: str, status: str, result_type: str = "complete", **extra: Any) -> dict[str, Any]:
    stamp = "2026-11-30T20:00:00Z"
    fields = {"taskId": task_id, "status": status, "createdAt": stamp, "lastUpdatedAt": stamp, "ttlMs": None}
    return {"resultType": result_type, **fields, **extra}


class ScriptedServer:
    """Answers tools/call with a task and tasks/get from a script of statuses; records every request."""

    def __init__(self, polls: list[dict[str, Any]], *, task_id: str = "t-1", create: bool = True) -> None:
        self.polls = polls
        self.task_id = task_id
        self.create = create
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.on_get: Callable[[], None] | None = None

    @property
    def methods(self) -> list[str]:
        return [method for method, _, _ in self.requests]

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        method, params = body["method"], body["params"]
        self.requests.append((method, dict(request.headers), params))
        if method == "tools/call":
            if not self.create:
                result: dict[str, Any] = {"resultType": "complete", "content": [{"type": "text", "text": "now"}]}
            else:
                result = _task(self.task_id, "working", "task", pollIntervalMs=1)
        elif method == "tasks/get":
            if self.on_get is not None:
                self.on_get()
            result = self.polls.pop(0) if len(self.polls) > 1 else self.polls[0]
        else:
            result = {"resultType": "complete"}
        message = {"jsonrpc": "2.0", "id": body["id"], "result": result}
        worker = f"w{len(self.requests)}"
        return httpx.Response(200, json=message, headers={WORKER_ID_HEADER: worker})


def _client(server: ScriptedServer, inputs: Any = None) -> Client:
    http = httpx.Client(transport=httpx.MockTransport(server.handle))
    return Client("http://mcp.test/mcp", inputs, http=http, task_policy=FAST)


def test_a_task_is_followed_and_its_questions_answered_by_the_same_handler() -> None:
    server = ScriptedServer(
        [
            _task("t-1", "working"),
            _task("t-1", "input_required", inputRequests={"refine": FORM}),
            _task("t-1", "input_required", inputRequests={"refine": FORM}),
            _task("t-1", "completed", result={"content": [], "structuredContent": {"pi": 3.14159}}),
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
    server = ScriptedServer([], create=False)
    with _client(server) as client:
        done = client.call_tool("count_primes", {"limit": 10})
    assert done.text == "now"
    assert "extensions" not in server.requests[0][2]["_meta"]["io.modelcontextprotocol/clientCapabilities"]


def test_a_server_that_makes_no_task_answers_a_task_call_at_once() -> None:
    server = ScriptedServer([], create=False)
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

    async def handle(request: httpx.Request) -> httpx.Response:
        return server.handle(request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(handle))
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
            _task("t-1", "completed", result={"content": [{"type": "text", "text": "done"}]}),
        ]
    )

    async def handle(request: httpx.Request) -> httpx.Response:
        return server.handle(request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    async with AsyncClient("http://mcp.test/mcp", ScriptedInputs(), http=http, task_policy=FAST) as client:
        done = await client.call_tool("confirm_delete", {"filename": "x"}, task=True)
        snapshot = await client.get_task("t-1")
        await client.cancel_task("t-1")
    assert done.text == "done"
    assert snapshot.status == "completed"
    assert server.methods == ["tools/call", "tasks/get", "tasks/update", "tasks/get", "tasks/get", "tasks/cancel"]
