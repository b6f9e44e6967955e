"""A scripted MCP server behind httpx.MockTransport, for the client's task tests (no process, no network).

`tools/call` answers a `CreateTaskResult` (or the given result or error), `tasks/get` answers the next
scripted task (the last one again once the script runs out), `tasks/update` and `tasks/cancel` an
empty ack. Every request is recorded with its headers, and each reply names a worker `w<n>` (n = the
request's number), as the fleet's `X-Worker-Id` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from mrtr_protocol.instance import WORKER_ID_HEADER
from mrtr_protocol.tasks import SUBSCRIPTIONS_LISTEN

STAMP = "2026-11-30T20:00:00Z"


def wire_task(task_id: str, status: str, result_type: str = "complete", **extra: Any) -> dict[str, Any]:
    """A task in the released extension's flat shape (`tasks/get`, or with result_type "task" a creation).

    It asks to be polled every millisecond unless `pollIntervalMs` is given, so scripted tests run fast.
    """
    fields = {"taskId": task_id, "status": status, "createdAt": STAMP, "lastUpdatedAt": STAMP, "ttlMs": None}
    return {"resultType": result_type, **fields, "pollIntervalMs": 1, **extra}


class ScriptedServer:
    def __init__(
        self,
        polls: list[dict[str, Any]],
        *,
        task_id: str = "t-1",
        call_result: dict[str, Any] | None = None,
        call_error: dict[str, Any] | None = None,
        get_error: dict[str, Any] | None = None,
    ) -> None:
        self.polls = list(polls)
        self.task_id = task_id
        self.call_result = call_result
        self.call_error = call_error
        self.get_error = get_error
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.on_get: Callable[[], None] | None = None
        self.listens = 0

    @property
    def methods(self) -> list[str]:
        return [method for method, _, _ in self.requests]

    def params(self, method: str) -> list[dict[str, Any]]:
        return [params for m, _, params in self.requests if m == method]

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        method, params = body["method"], body["params"]
        if method == SUBSCRIPTIONS_LISTEN:  # no push here: the client falls back to polling (push: a real worker)
            self.listens += 1
            refused = {"code": -32601, "message": "Method not found"}
            return httpx.Response(404, json={"jsonrpc": "2.0", "id": body["id"], "error": refused})
        self.requests.append((method, dict(request.headers), params))
        worker = {WORKER_ID_HEADER: f"w{len(self.requests)}"}
        error = {"tools/call": self.call_error, "tasks/get": self.get_error}.get(method)
        if error is not None:
            return httpx.Response(400, json={"jsonrpc": "2.0", "id": body["id"], "error": error}, headers=worker)
        if method == "tools/call":
            result = self.call_result or wire_task(self.task_id, "working", "task")
        elif method == "tasks/get":
            if self.on_get is not None:
                self.on_get()
            result = self.polls.pop(0) if len(self.polls) > 1 else self.polls[0]
        else:
            result = {"resultType": "complete"}
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": result}, headers=worker)

    async def handle_async(self, request: httpx.Request) -> httpx.Response:
        return self.handle(request)

    def sync_http(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self.handle))

    def async_http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handle_async))
