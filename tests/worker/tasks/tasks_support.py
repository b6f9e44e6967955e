"""A raw task client for the worker tests: sends exactly what the conformance suite sends, reads the answer.

Every answer is validated against the official schemas (`tests.support.schema`: a task's answers by the
extension's definitions, a completed task's inlined result by the wire's `CallToolResult`); the tests
check the task wire field by field on top.
"""

from __future__ import annotations

import secrets
from typing import Any

import httpx

from mrtr_ops.waiting import wait_until
from mrtr_protocol.rounds import RETRYABLE_STATUSES
from mrtr_protocol.tasks import EXTENSION_ID, TASK_METHODS
from mrtr_protocol.wire import encode_request, request_headers, request_meta
from tests.support.schema import check_server_message
from tests.support.wire import parse_body

EXT: dict[str, Any] = {"extensions": {EXTENSION_ID: {}}}
FORMS_AND_EXT: dict[str, Any] = {"elicitation": {}, "sampling": {}, **EXT}
TERMINAL = ("completed", "failed", "cancelled")

__all__ = ["EXT", "EXTENSION_ID", "FORMS_AND_EXT", "TERMINAL", "RpcError", "TaskClient"]


class RpcError(Exception):
    def __init__(self, error: dict[str, Any], status: int) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code: int = error.get("code", 0)
        self.data: Any = error.get("data")
        self.message = str(error.get("message", ""))
        self.status = status


class TaskClient:
    """One client of one worker (or proxy) `/mcp`, optionally with a bearer token."""

    def __init__(self, base_url: str, *, token: str | None = None, capabilities: dict[str, Any] | None = None) -> None:
        self.url = f"{base_url}/mcp"
        self.http = httpx.Client(timeout=30.0)
        self.token = token
        self.capabilities = FORMS_AND_EXT if capabilities is None else capabilities

    def close(self) -> None:
        self.http.close()

    def request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        capabilities: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """The result, or `RpcError` for a JSON-RPC error."""
        body_params = dict(params)
        body_params.setdefault("_meta", request_meta(self.capabilities if capabilities is None else capabilities))
        extra = dict(headers or {})
        if method in TASK_METHODS and "taskId" in params:
            extra.setdefault("Mcp-Name", str(params["taskId"]))
        if self.token is not None:
            extra["Authorization"] = f"Bearer {self.token}"
        body = encode_request(secrets.randbelow(1 << 30), method, body_params)
        response = self.http.post(self.url, content=body, headers=request_headers(method, body_params, extra))
        message = parse_body(response)
        check_server_message(method, message)
        if "error" in message:
            raise RpcError(message["error"], response.status_code)
        assert "result" in message, (response.status_code, response.text[:300])
        result: dict[str, Any] = message["result"]
        return result

    def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
        extra = kwargs.pop("params", {})
        return self.request("tools/call", {"name": name, "arguments": arguments or {}, **extra}, **kwargs)

    def get(self, task_id: str, **kwargs: Any) -> dict[str, Any]:
        return self.request("tasks/get", {"taskId": task_id}, **kwargs)

    def update(self, task_id: str, answers: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.request("tasks/update", {"taskId": task_id, "inputResponses": answers}, **kwargs)

    def cancel(self, task_id: str, **kwargs: Any) -> dict[str, Any]:
        return self.request("tasks/cancel", {"taskId": task_id}, **kwargs)

    def wait_status(self, task_id: str, *statuses: str, timeout: float = 20.0) -> dict[str, Any]:
        """Poll tasks/get until the status is one of `statuses` (a terminal status when none is named).

        A poll the proxy could not deliver or get answered (502, 503, 504: a worker killed under it) is polled
        again, as any client retries it."""
        wanted = statuses or TERMINAL

        def reached() -> dict[str, Any] | None:
            try:
                task = self.get(task_id)
            except RpcError as refused:
                if refused.status in RETRYABLE_STATUSES:
                    return None
                raise
            return task if task["status"] in wanted else None

        return wait_until(reached, timeout=timeout, interval=0.1, what=f"task {task_id} to reach {wanted}")

    def create(self, name: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> str:
        created = self.call_tool(name, arguments, **kwargs)
        assert created["resultType"] == "task", created
        task_id: str = created["taskId"]
        return task_id
