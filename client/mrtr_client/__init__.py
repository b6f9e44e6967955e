"""A client for MCP 2026-07-28 Multi Round-Trip Requests (SEP-2322), sync and async, over httpx.

from mrtr_client import Client, ScriptedInputs

with Client("http://127.0.0.1:8080/mcp", ScriptedInputs(forms={"github_login": {"name": "octocat"}})) as c:
    done = c.call_tool("link_accounts")
    print(done.structured, [hop.instance for hop in done.trace.hops])

    # the tasks extension: the server may make the call a task; it is followed to its end (pushed changes, else polls)
    done = c.call_tool("count_primes", {"limit": 5_000_000}, task=True, on_task=lambda x: print(x.status))
    print(done.task_id, done.structured, [poll.instance for poll in done.trace.polls])
"""

from mrtr_client._loop import RetryPolicy
from mrtr_client._tasks import TaskPolicy
from mrtr_client.client import AsyncClient, Client
from mrtr_client.errors import (
    AuthenticationFailed,
    InputDeclined,
    MrtrError,
    ProtocolViolation,
    RetryBudgetExhausted,
    RoundsExceeded,
    RpcError,
    TaskCancelled,
    TaskFailed,
    TaskWaitExceeded,
)
from mrtr_client.inputs import InputHandler, NoInputs, ScriptedInputs, default_form_content, sampling_answer
from mrtr_client.trace import CallResult, CallTrace, Hop, Question, TaskExchange, TaskSnapshot

__all__ = [
    "AsyncClient",
    "AuthenticationFailed",
    "CallResult",
    "CallTrace",
    "Client",
    "Hop",
    "InputDeclined",
    "InputHandler",
    "MrtrError",
    "NoInputs",
    "ProtocolViolation",
    "Question",
    "RetryBudgetExhausted",
    "RetryPolicy",
    "RoundsExceeded",
    "RpcError",
    "ScriptedInputs",
    "TaskCancelled",
    "TaskExchange",
    "TaskFailed",
    "TaskPolicy",
    "TaskSnapshot",
    "TaskWaitExceeded",
    "default_form_content",
    "sampling_answer",
]
