"""Sync and async MRTR clients over httpx: thin runners around the I/O-free loop in `_loop`."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Mapping
from typing import Any

import httpx

from mrtr_client._loop import Ask, Failure, Loop, Reply, RetryPolicy, Send, new_id_source
from mrtr_client._loop import mrtr_loop as _mrtr_loop
from mrtr_client.inputs import Answer, InputHandler, NoInputs
from mrtr_client.trace import CallResult

DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=5.0)


class _Calls:
    """The MCP methods both clients offer, expressed as loops."""

    def __init__(
        self,
        url: str,
        inputs: InputHandler | None,
        policy: RetryPolicy | None,
        headers: Mapping[str, str] | None,
        token: str | None,
    ) -> None:
        self.url = url
        self.inputs: InputHandler = inputs or NoInputs()
        self.policy = policy or RetryPolicy()
        self._headers = dict(headers or {})
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._ids = new_id_source()

    def _loop(self, method: str, params: Mapping[str, Any]) -> Loop:
        return _mrtr_loop(method, params, self.inputs.capabilities(), self._ids, self.policy, self._headers)

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
    ) -> None:
        super().__init__(url, inputs, policy, headers, token)
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

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> CallResult:
        return self.request("tools/call", self._tool_params(name, arguments))

    def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> CallResult:
        return self.request("prompts/get", self._prompt_params(name, arguments))

    def read_resource(self, uri: str) -> CallResult:
        return self.request("resources/read", {"uri": uri})

    def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = self.request("tools/list").result.get("tools", [])
        return tools

    def _run(self, loop: Loop) -> CallResult:
        step = next(loop)
        while True:
            if isinstance(step, Send):
                value: Any = self._post(step)
            elif isinstance(step, Ask):
                value = {key: self._answer(key, req) for key, req in step.requests.items()}
            else:
                time.sleep(step.seconds)
                value = None
            try:
                step = loop.send(value)
            except StopIteration as done:
                result: CallResult = done.value
                return result

    def _answer(self, key: str, request: Mapping[str, Any]) -> Answer:
        answer = self.inputs.answer(key, request)
        if inspect.isawaitable(answer):
            raise TypeError("the sync Client needs a sync InputHandler")
        return answer

    def _post(self, send: Send) -> Reply | Failure:
        started = time.perf_counter()
        try:
            response = self._http.post(self.url, content=send.body, headers=send.headers)
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
    ) -> None:
        super().__init__(url, inputs, policy, headers, token)
        self._http = http or httpx.AsyncClient(timeout=DEFAULT_TIMEOUT)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> CallResult:
        return await self._run(self._loop(method, params or {}))

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> CallResult:
        return await self.request("tools/call", self._tool_params(name, arguments))

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> CallResult:
        return await self.request("prompts/get", self._prompt_params(name, arguments))

    async def read_resource(self, uri: str) -> CallResult:
        return await self.request("resources/read", {"uri": uri})

    async def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = (await self.request("tools/list")).result.get("tools", [])
        return tools

    async def _run(self, loop: Loop) -> CallResult:
        step = next(loop)
        while True:
            if isinstance(step, Send):
                value: Any = await self._post(step)
            elif isinstance(step, Ask):
                value = {key: await self._answer(key, req) for key, req in step.requests.items()}
            else:
                await asyncio.sleep(step.seconds)
                value = None
            try:
                step = loop.send(value)
            except StopIteration as done:
                result: CallResult = done.value
                return result

    async def _answer(self, key: str, request: Mapping[str, Any]) -> Answer:
        answer = self.inputs.answer(key, request)
        if inspect.isawaitable(answer):
            return await answer
        return answer

    async def _post(self, send: Send) -> Reply | Failure:
        started = time.perf_counter()
        try:
            response = await self._http.post(self.url, content=send.body, headers=send.headers)
        except httpx.TransportError as exc:
            return Failure(f"{type(exc).__name__}: {exc}", _ms_since(started))
        return Reply(response.status_code, response.headers, response.content, _ms_since(started))


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000
