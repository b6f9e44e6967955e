"""Sync and async MRTR clients over httpx: thin runners around the I/O-free loops in `_loop` and `_tasks`.

Every request goes through httpx; a caller that wants another transport (a proxy, TLS settings, a leaner
connection for a load generator) passes its own `httpx.Client` or `httpx.AsyncClient`.

Tasks (the `io.modelcontextprotocol/tasks` extension): `call_tool(..., task=True)`
declares the extension; the server decides whether the call becomes a task.
Either way the caller gets the same `CallResult` (`result.task_id` says
whether a task was made, `result.trace.polls` what each poll saw). The
runners hand every exception raised while performing a step (an interrupt:
`KeyboardInterrupt`, `asyncio.CancelledError`; a failing input handler) to the
loop, which cancels its task, if it has one, before the exception goes on.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Generator, Mapping
from typing import Any, TypeVar, cast

import httpx

from mrtr_client._http_stream import AsyncStreams, SyncStreams
from mrtr_client._loop import Ask, Failure, Loop, Observe, Reply, RetryPolicy, Send, Step, new_id_source
from mrtr_client._loop import mrtr_loop as _mrtr_loop
from mrtr_client._stream import CloseStream, OpenStream, ReadStream
from mrtr_client._tasks import TaskPolicy, follow_task_loop, task_call_loop, task_request_loop
from mrtr_client.inputs import Answer, InputHandler, NoInputs
from mrtr_client.trace import CallResult, TaskExchange, TaskSnapshot
from mrtr_protocol.tasks import TASKS_CANCEL, TASKS_GET

DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=5.0)

T = TypeVar("T")
OnTask = Callable[[TaskExchange], None]
"""Called with each exchange about a task as it happens: creation, every poll, every answer, a cancel."""


class _Calls:
    """The MCP methods both clients offer, expressed as loops."""

    def __init__(
        self,
        url: str,
        inputs: InputHandler | None,
        policy: RetryPolicy | None,
        headers: Mapping[str, str] | None,
        token: str | None,
        task_policy: TaskPolicy | None = None,
    ) -> None:
        self.url = url
        self.inputs: InputHandler = inputs or NoInputs()
        self.policy = policy or RetryPolicy()
        self.task_policy = task_policy or TaskPolicy()
        self._headers = dict(headers or {})
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._ids = new_id_source()

    def _loop(self, method: str, params: Mapping[str, Any], task: bool = False) -> Loop:
        capabilities = self.inputs.capabilities()
        if task:
            return task_call_loop(method, params, capabilities, self._ids, self.policy, self.task_policy, self._headers)
        return _mrtr_loop(method, params, capabilities, self._ids, self.policy, self._headers)

    def _follow_loop(self, task_id: str) -> Loop:
        capabilities = self.inputs.capabilities()
        return follow_task_loop(task_id, capabilities, self._ids, self.policy, self.task_policy, self._headers)

    def _task_request(self, method: str, task_id: str) -> Generator[Step, Any, TaskSnapshot | None]:
        return task_request_loop(method, task_id, self.inputs.capabilities(), self._ids, self.policy, self._headers)

    @staticmethod
    def _tool_params(name: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        return {"name": name, "arguments": dict(arguments or {})}

    @staticmethod
    def _prompt_params(name: str, arguments: Mapping[str, str] | None) -> dict[str, Any]:
        return {"name": name, "arguments": dict(arguments or {})}


class Client(_Calls):
    """Blocking client (scripts, Locust, the CLI)."""

    def __init__(
        self,
        url: str,
        inputs: InputHandler | None = None,
        *,
        policy: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        token: str | None = None,
        http: httpx.Client | None = None,
        task_policy: TaskPolicy | None = None,
    ) -> None:
        super().__init__(url, inputs, policy, headers, token, task_policy)
        self._http = http or httpx.Client(timeout=DEFAULT_TIMEOUT)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, params: Mapping[str, Any] | None = None) -> CallResult:
        """Any MCP request, driven through input_required rounds to its complete result."""
        return self._run(self._loop(method, params or {}))

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        task: bool = False,
        on_task: OnTask | None = None,
    ) -> CallResult:
        """Call a tool through its rounds; with `task=True` the server may make it a task, followed to its end.

        A task's `failed` raises `TaskFailed`, `cancelled` raises `TaskCancelled`, a wait past
        `task_policy.max_wait` raises `TaskWaitExceeded` (the task goes on); Ctrl-C cancels the task.
        """
        return self._run(self._loop("tools/call", self._tool_params(name, arguments), task), on_task)

    def wait_task(self, task_id: str, *, on_task: OnTask | None = None) -> CallResult:
        """Follow an existing task to its end (answering its questions), as `call_tool(task=True)` does."""
        return self._run(self._follow_loop(task_id), on_task)

    def get_task(self, task_id: str) -> TaskSnapshot:
        """The task as the server describes it now (one `tasks/get`)."""
        return cast(TaskSnapshot, self._run(self._task_request(TASKS_GET, task_id)))

    def cancel_task(self, task_id: str) -> None:
        """Ask the server to cancel the task (`tasks/cancel`: acknowledged at once, settles at a step boundary)."""
        self._run(self._task_request(TASKS_CANCEL, task_id))

    def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> CallResult:
        return self.request("prompts/get", self._prompt_params(name, arguments))

    def read_resource(self, uri: str) -> CallResult:
        return self.request("resources/read", {"uri": uri})

    def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = self.request("tools/list").result.get("tools", [])
        return tools

    def _run(self, loop: Generator[Step, Any, T], on_task: OnTask | None = None) -> T:
        streams = SyncStreams(self._http, self.url)  # this call's push streams, none left open after it
        try:
            step = next(loop)
            while True:
                try:
                    try:
                        value = self._perform(step, on_task, streams)
                    except BaseException as exc:  # an interrupt or a failing handler: the loop cancels its task first
                        step = loop.throw(exc)
                    else:
                        step = loop.send(value)
                except StopIteration as done:
                    return cast(T, done.value)
        finally:
            streams.close_all()

    def _perform(self, step: Step, on_task: OnTask | None, streams: SyncStreams) -> Any:
        if isinstance(step, Send):
            return self._post(step)
        if isinstance(step, OpenStream):
            return streams.open(step)
        if isinstance(step, ReadStream):
            return streams.read(step)
        if isinstance(step, CloseStream):
            return streams.close(step.stream)
        if isinstance(step, Ask):
            return {key: self._answer(key, req) for key, req in step.requests.items()}
        if isinstance(step, Observe):
            if on_task is not None:
                on_task(step.event)
            return None
        time.sleep(step.seconds)
        return None

    def _answer(self, key: str, request: Mapping[str, Any]) -> Answer:
        answer = self.inputs.answer(key, request)
        if inspect.isawaitable(answer):
            raise TypeError("the sync Client needs a sync InputHandler")
        return answer

    def _post(self, send: Send) -> Reply | Failure:
        started = time.perf_counter()
        try:
            timeout = _timeout(send, self._http)
            response = self._http.post(self.url, content=send.body, headers=send.headers, timeout=timeout)
        except httpx.TransportError as exc:
            return Failure(f"{type(exc).__name__}: {exc}", _ms_since(started))
        return Reply(response.status_code, response.headers, response.content, _ms_since(started))


class AsyncClient(_Calls):
    """asyncio client (services, tests, many concurrent calls)."""

    def __init__(
        self,
        url: str,
        inputs: InputHandler | None = None,
        *,
        policy: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        token: str | None = None,
        http: httpx.AsyncClient | None = None,
        task_policy: TaskPolicy | None = None,
    ) -> None:
        super().__init__(url, inputs, policy, headers, token, task_policy)
        self._http = http or httpx.AsyncClient(timeout=DEFAULT_TIMEOUT)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> CallResult:
        return await self._run(self._loop(method, params or {}))

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        task: bool = False,
        on_task: OnTask | None = None,
    ) -> CallResult:
        """As `Client.call_tool`; cancelling the awaiting asyncio task cancels the MCP task."""
        return await self._run(self._loop("tools/call", self._tool_params(name, arguments), task), on_task)

    async def wait_task(self, task_id: str, *, on_task: OnTask | None = None) -> CallResult:
        return await self._run(self._follow_loop(task_id), on_task)

    async def get_task(self, task_id: str) -> TaskSnapshot:
        return cast(TaskSnapshot, await self._run(self._task_request(TASKS_GET, task_id)))

    async def cancel_task(self, task_id: str) -> None:
        await self._run(self._task_request(TASKS_CANCEL, task_id))

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> CallResult:
        return await self.request("prompts/get", self._prompt_params(name, arguments))

    async def read_resource(self, uri: str) -> CallResult:
        return await self.request("resources/read", {"uri": uri})

    async def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = (await self.request("tools/list")).result.get("tools", [])
        return tools

    async def _run(self, loop: Generator[Step, Any, T], on_task: OnTask | None = None) -> T:
        streams = AsyncStreams(self._http, self.url)  # this call's push streams, none left open after it
        try:
            step = next(loop)
            while True:
                try:
                    try:
                        value = await self._perform(step, on_task, streams)
                    except BaseException as exc:  # CancelledError or a failing handler: the loop cancels its task first
                        step = loop.throw(exc)
                    else:
                        step = loop.send(value)
                except StopIteration as done:
                    return cast(T, done.value)
        finally:
            await streams.close_all()

    async def _perform(self, step: Step, on_task: OnTask | None, streams: AsyncStreams) -> Any:
        if isinstance(step, Send):
            return await self._post(step)
        if isinstance(step, OpenStream):
            return await streams.open(step)
        if isinstance(step, ReadStream):
            return await streams.read(step)
        if isinstance(step, CloseStream):
            return await streams.close(step.stream)
        if isinstance(step, Ask):
            return {key: await self._answer(key, req) for key, req in step.requests.items()}
        if isinstance(step, Observe):
            if on_task is not None:
                on_task(step.event)
            return None
        await asyncio.sleep(step.seconds)
        return None

    async def _answer(self, key: str, request: Mapping[str, Any]) -> Answer:
        answer = self.inputs.answer(key, request)
        if inspect.isawaitable(answer):
            return await answer
        return answer

    async def _post(self, send: Send) -> Reply | Failure:
        started = time.perf_counter()
        try:
            timeout = _timeout(send, self._http)
            response = await self._http.post(self.url, content=send.body, headers=send.headers, timeout=timeout)
        except httpx.TransportError as exc:
            return Failure(f"{type(exc).__name__}: {exc}", _ms_since(started))
        return Reply(response.status_code, response.headers, response.content, _ms_since(started))


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _timeout(send: Send, http: httpx.Client | httpx.AsyncClient) -> httpx.Timeout | float:
    return http.timeout if send.timeout is None else send.timeout
