"""Errors a caller of the MRTR client can meet, each saying what to do next."""

from __future__ import annotations

from typing import Any

from mrtr_protocol.busy import busy_retry_after_ms


class MrtrError(Exception):
    """Base class of every error this client raises."""


class RpcError(MrtrError):
    """The server answered with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None, *, http_status: int | None = None) -> None:
        super().__init__(f"{message} (JSON-RPC {code})")
        self.code = code
        self.message = message
        self.data = data
        self.http_status = http_status

    @property
    def retry_after_ms(self) -> float | None:
        """A busy refusal's retry hint (`mrtr_protocol.busy`): nothing ran, send the call again after this long.
        None for any other error."""
        return busy_retry_after_ms(self.code, self.data)

    @property
    def restart_advised(self) -> bool:
        """The server could not use the state and asks for the call to start again."""
        return isinstance(self.data, dict) and self.data.get("restart") is True


class RoundsExceeded(MrtrError):
    """The server kept answering input_required past the client's round cap."""

    def __init__(self, max_rounds: int) -> None:
        super().__init__(f"no complete result after {max_rounds} rounds; raise max_rounds or give up")
        self.max_rounds = max_rounds


class RetryBudgetExhausted(MrtrError):
    """Delivery kept failing (connection errors, 502/503/504) past the retry budget."""

    def __init__(self, attempts: int, last_problem: str) -> None:
        super().__init__(f"gave up after {attempts} failed deliveries; last: {last_problem}")
        self.attempts = attempts
        self.last_problem = last_problem


class AuthenticationFailed(MrtrError):
    """The server refused the call's credentials (HTTP 401/403): give a valid bearer token (`token=`)."""

    def __init__(self, http_status: int, description: str) -> None:
        super().__init__(f"HTTP {http_status}: {description}")
        self.http_status = http_status
        self.description = description


class ProtocolViolation(MrtrError):
    """The server's answer does not follow the MCP wire (unknown resultType, no result, bad JSON)."""


class InputDeclined(MrtrError):
    """An input handler could not answer a request of this kind."""


class TaskFailed(RpcError):
    """The task ended `failed`: its JSON-RPC error is this error's code, message and data."""

    def __init__(self, task_id: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(code, message, data)
        self.args = (f"task {task_id} failed: {message} (JSON-RPC {code})",)
        self.task_id = task_id


class TaskCancelled(MrtrError):
    """The task ended `cancelled` (by this client, another one, or the server)."""

    def __init__(self, task_id: str, status_message: str | None = None) -> None:
        super().__init__(f"task {task_id} was cancelled" + (f": {status_message}" if status_message else ""))
        self.task_id = task_id
        self.status_message = status_message


class TaskWaitExceeded(MrtrError):
    """The task did not end within the caller's wait; it goes on: poll it again (`wait_task`) or `cancel_task` it."""

    def __init__(self, task_id: str, waited_s: float, status: str) -> None:
        super().__init__(f"task {task_id} still {status} after {waited_s:.1f} s of waiting; it goes on on the server")
        self.task_id = task_id
        self.waited_s = waited_s
        self.status = status
